package workloads

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
)

// Options configure one run (see Run).
type Options struct {
	// Target is "embedded" (default) or "kafka://host:port[,host:port]".
	Target string
	// OutDir is the parent of the run directory; default "results/runs".
	OutDir string
	// ID overrides the run id (default: UTC yyyymmdd-hhmmss-<name>-<config hash>).
	ID string
	// Profile lists pprof kinds (cpu, heap, allocs, mutex, block, goroutine) captured during
	// the measurement into <run dir>/profiles/.
	Profile []string
	// Quiet suppresses the summary table and progress line.
	Quiet bool
	// Stdout gets the summary table, Stderr the progress line and notes (nil = discard).
	Stdout, Stderr io.Writer
	// WaitMode is the pacer's wait (default DefaultWaitMode).
	WaitMode WaitMode
	// TimelineInterval is the timeline's period; default 1s (100ms for runs shorter than 10s).
	TimelineInterval time.Duration
	// Commit is recorded in env.commit (default: the binary's VCS revision).
	Commit string
	// Assume lists broker settings already in effect on a kafka:// target (ParseAssume):
	// the run neither changes them nor needs the brokers to report them.
	Assume map[string]string
	// Worker makes the run one worker of several (worker.go); zero: the whole load.
	Worker Worker

	// session applies the spec's settings to a kafka:// target; Sweep sets one for all its
	// points, nil makes Run use its own (restored when it ends).
	session *ConfigSession

	// statFS replaces the disk guard's statfs (tests simulate a filling disk).
	statFS func(path string) (free, total uint64, err error)
	// fs is the embedded brokers' file system (tests fill it).
	fs vfs.FS
}

// ErrDurability is wrapped by Run's error when acknowledged records were lost although only
// clean leader elections were allowed (the result is still returned and written).
var ErrDurability = errors.New("acknowledged records lost")

// profileStarter starts pprof capture; stop returns the files written.
var profileStarter = func(kinds []string, dir string) (stop func() ([]string, error), err error) {
	s, err := profiles.Start(kinds, dir)
	if err != nil {
		return nil, err
	}
	return s.Stop, nil
}

// RunID returns the default run id: UTC time, spec name and a short hash of the effective config.
func RunID(s *Spec, now time.Time) string {
	b, _ := json.Marshal(s.Config()) // map keys are sorted: stable
	sum := sha256.Sum256(b)
	return now.UTC().Format("20060102-150405") + "-" + s.Name + "-" + hex.EncodeToString(sum[:3])
}

// Run runs one workload: start (or connect to) the target, create the topic, wait for full
// ISRs, run warm-up then measurement, drain, check durability, write the outputs into
// <OutDir>/<id>/ and return the result. The embedded cluster and its temp data dir are removed
// before Run returns, also on error and cancellation. A run whose clean elections lost
// acknowledged records returns its result and an error wrapping ErrDurability.
func Run(ctx context.Context, s *Spec, o Options) (res *results.Result, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join("results", "runs")
	}
	if o.Target == "" {
		o.Target = s.TargetName()
	}
	if o.WaitMode == "" {
		o.WaitMode = DefaultWaitMode
	}
	if o.TimelineInterval <= 0 {
		o.TimelineInterval = time.Second
		if s.Duration < 10*time.Second {
			o.TimelineInterval = 100 * time.Millisecond
		}
	}
	if len(o.Profile) > 0 {
		if err := profiles.ValidateKinds(o.Profile); err != nil {
			return nil, err
		}
	}
	if err := o.Worker.CheckSpec(s, o.Target); err != nil {
		return nil, err
	}
	if n := embeddedOnlyFaults(s); n > 0 && o.Target != "embedded" {
		return nil, fmt.Errorf("spec %s has %d faults of kinds that need the embedded target (%s), not %s; use kind exec", s.Name, n, strings.Join(embeddedFaultKinds(), ", "), o.Target)
	}
	startedAt := time.Now()
	id := o.ID
	if id == "" {
		id = RunID(s, startedAt)
	}
	dir, err := makeRunDir(o.OutDir, id)
	if err != nil {
		return nil, err
	}
	id = filepath.Base(dir)
	r := &run{spec: s, opts: o, dir: dir, hwlag: results.NewRecorder()}
	res, err = r.do(ctx, id, startedAt)
	if r.restoreErr != nil {
		err = errors.Join(err, r.restoreErr)
	}
	if res == nil {
		// A run that ended before it had anything to write (the target did not open, the
		// topic could not be created, ctrl-C during setup) leaves no empty run dir behind;
		// os.Remove keeps a dir that holds something (a partial timeline, profiles).
		os.Remove(dir)
	}
	return res, err
}

func makeRunDir(parent, id string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("output dir: %w", err)
	}
	for i := 1; ; i++ {
		d := filepath.Join(parent, id)
		if i > 1 {
			d = fmt.Sprintf("%s-%d", d, i)
		}
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !os.IsExist(err) || i > 100 {
			return "", fmt.Errorf("output dir: %w", err)
		}
	}
}

type run struct {
	spec *Spec
	opts Options
	dir  string
	tgt  Target
	// parts are tgt's optional parts (Inspector), fixed when it opened.
	parts Inspection
	win   window
	// hwWin is win for the core's OnHWLag callbacks (broker goroutines, synchronised with the
	// runner only through sockets): published atomically.
	hwWin atomic.Pointer[window]
	hwlag *results.Recorder // HW lag from the core, filtered to the window

	prods []*producer
	cons  []*consumer

	faultsMu sync.Mutex
	faults   []indexedFault
	hists    runHists

	// External clusters and workers (runner_external.go).
	ownSession     *ConfigSession // the run's own settings session, restored at its end
	restoreErr     error
	targetSettings []results.TargetSetting
	targetNotes    []string
	obs            *hwObserver // client-observed HW lag; nil without acknowledged producers
	obsStop        func()
	obsUnseen      int

	// The phases' state (runner_setup.go): the plan and what setup and measure started.
	plan      runPlan
	loops     loops
	adm       *kadm.Client
	guard     *diskGuard // nil without a local data dir
	tl        *timeline
	pt        *partTimeline // nil when the target cannot sample partitions
	gp        *groupProbe   // nil without a consumer group
	cost      *costMeter
	prodErrs  []error // per producer, set when the load ends
	profFiles []string
	profErr   error
	// clientHgrms are the client-observed HW lag's histograms (externalResult).
	clientHgrms []results.NamedHistogram
	// Loops settle and report stop or wait for (nil when not started).
	tlLoop, ptLoop, consLoop, gpLoop *loop
}

// do runs the phases of the run (runner_setup.go): setup, measure, settle, verify and
// report; whatever a phase started is stopped and closed by loops.close on every path.
func (r *run) do(ctx context.Context, id string, startedAt time.Time) (*results.Result, error) {
	defer r.loops.close()
	if err := r.setup(ctx, id, startedAt); err != nil {
		return nil, err
	}
	if err := r.measure(ctx); err != nil {
		return nil, err
	}
	st, err := r.settle(ctx)
	if err != nil {
		return nil, err
	}
	v, err := r.verify(ctx, st)
	if err != nil {
		return nil, err
	}
	return r.report(st, v)
}

// groupFigures sums the producers' acknowledgements and failures per producer group.
func (r *run) groupFigures() []GroupFigures {
	var out []GroupFigures
	for gi, g := range r.spec.ProducerGroups() {
		gf := GroupFigures{Group: gi, Acks: g.Acks, Count: g.Count, Errors: map[string]int64{}}
		if r.opts.Worker.Active() {
			gf.Count = 0 // this worker's share
		}
		for _, p := range r.prods {
			if p.group != gi {
				continue
			}
			if r.opts.Worker.Active() {
				gf.Count++
			}
			gf.Failed += p.nErrs.Load()
			p.mu.Lock()
			gf.Acked += p.acked.count()
			p.mu.Unlock()
			for k, v := range p.errCounts() {
				gf.Errors[k] += v
			}
		}
		out = append(out, gf)
	}
	return out
}

// formatCounts is "A=1 B=2" in name order.
func formatCounts(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// lossExpected says why this spec may lose acknowledged acks=all records ("" = it must not):
// unclean leader election, the truncate-to-HW ablation, or a crash (power loss) without an
// fsync per message.
func lossExpected(s *Spec) string {
	var why []string
	if s.Broker.UncleanLeaderElectionEnable {
		why = append(why, "unclean.leader.election.enable=true")
	}
	if s.Broker.TruncateMode == "hw" {
		why = append(why, "isrbench.truncate.mode=hw (ablation)")
	}
	if s.Broker.FlushMessages > 1 {
		for _, f := range s.Faults {
			if f.Kind == "crash-broker" {
				why = append(why, "crash-broker with flush.messages > 1 (unsynced data dropped)")
				break
			}
		}
	}
	return strings.Join(why, "; ")
}

// partitionErrors sums the producers' failed records by partition and error name (whole run).
func (r *run) partitionErrors() map[int32]map[string]int64 {
	out := map[int32]map[string]int64{}
	for _, p := range r.prods {
		p.mu.Lock()
		for part, m := range p.partErrs {
			o := out[part]
			if o == nil {
				o = map[string]int64{}
				out[part] = o
			}
			for k, v := range m {
				o[k] += v
			}
		}
		p.mu.Unlock()
	}
	return out
}

// failedBetween counts failed records whose intended send time lies in [from, to] seconds
// after the start of measurement.
func (r *run) failedBetween(from, to float64) int64 {
	lo := r.win.start + int64(from*1e9)
	hi := r.win.start + int64(to*1e9)
	var n int64
	for _, p := range r.prods {
		p.mu.Lock()
		for _, t := range p.failTimes {
			if t >= lo && t <= hi {
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// waitFollowersFetching waits (up to d) until every follower of the freshly created topic has
// fetched from its leader. A follower whose first fetch raced the leader's own metadata update
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) backs off replica.fetch.backoff.ms, as
// in Kafka, and its partition then waits for the fetcher's parked long poll: acks=all produces
// to it stall for up to backoff + replica.fetch.wait.max.ms (1.5 s by default). That belongs to
// topic creation, not to the workload, so the load starts after it. It returns what is still
// not fetching when d passes ("" when ready).
func waitFollowersFetching(ctx context.Context, rr replicationReadier, topic string, d time.Duration) string {
	return pollUntil(ctx, d, 5*time.Millisecond, func() string { return rr.ReplicationReady(topic) })
}

// diskGuardInterval is how often the disk guard checks the data dir's filesystem.
var diskGuardInterval = time.Second

func drainTimeout(s *Spec) time.Duration {
	d := 30 * time.Second
	if t := time.Duration(s.Producers.DeliveryTimeoutMs) * time.Millisecond; t > 0 && t+5*time.Second < d {
		d = t + 5*time.Second
	}
	return d
}

func (r *run) closeClients() {
	for _, p := range r.prods {
		p.cl.Close()
	}
	for _, c := range r.cons {
		c.close()
	}
	r.prods, r.cons = r.prods[:len(r.prods):len(r.prods)], r.cons[:len(r.cons):len(r.cons)]
}

func (r *run) onHWLag(lagNs, records int64) {
	w := r.hwWin.Load()
	if w == nil {
		return
	}
	// A batch belongs to the window by its leader append time, as the producer-side
	// histograms go by intended send time: warm-up batches the HW passes later stay out.
	if appended := time.Now().UnixNano() - lagNs; w.in(appended) {
		r.hwlag.RecordNsN(lagNs, records)
	}
}

// waitConsumers waits until every consumer received everything below end, or d passed; it
// reports whether they all caught up.
func (r *run) waitConsumers(ctx context.Context, end []int64, d time.Duration) bool {
	return pollUntil(ctx, d, 20*time.Millisecond, func() string {
		if r.spec.Consumers.GroupID != "" {
			if !groupCaughtUp(r.cons, end) {
				return "the group is behind"
			}
			return ""
		}
		for _, c := range r.cons {
			if !c.caughtUp(end) {
				return "a consumer is behind"
			}
		}
		return ""
	}) == ""
}

// result assembles result.json from the merged histograms and counters.
func (r *run) result(id string, startedAt time.Time, tl *timeline, dc results.DurabilityCounts, byAcks map[string]results.DurabilityCounts) *results.Result {
	s := r.spec
	ack, sd, e2e := results.NewHistogram(), results.NewHistogram(), results.NewHistogram()
	var recs, bytes int64
	errs := map[string]int64{}
	for _, p := range r.prods {
		ack.Merge(p.ack.Snapshot())
		sd.Merge(p.sendDelay)
		recs += p.nAcked.Load()
		bytes += p.nBytes.Load()
		for k, v := range p.errCounts() {
			errs[k] += v
		}
	}
	for _, c := range r.cons {
		e2e.Merge(c.e2e)
	}
	hw := r.hwlag.Snapshot()
	secs := s.Duration.Seconds()
	res := &results.Result{
		Schema: results.SchemaVersion, ID: id, Name: s.Name, Target: r.tgt.Name(),
		StartedAt: startedAt.UTC(), DurationS: secs, Env: results.CurrentEnv(r.opts.Commit),
		Config: s.Config(),
		Produced: results.Produced{Records: recs, Bytes: bytes, RecordsPerSec: float64(recs) / secs,
			MBPerSec: float64(bytes) / secs / 1e6, Errors: errs},
		AckLatencyUs: results.Summarize(ack), HWLagUs: results.Summarize(hw),
		E2ELatencyUs: results.Summarize(e2e), SendDelayUs: results.Summarize(sd),
		ISR: results.ISR{Shrinks: tl.shrinks(), Expands: tl.expands(), UnderReplicatedS: tl.underReplicatedS},
	}
	res.Config["target"] = r.tgt.Name()
	res.Durability.DurabilityCounts = dc
	res.Durability.ByAcks = byAcks
	if _, ok := byAcks["0"]; ok {
		res.Note("durability", "acks=0: nothing is acknowledged, durability counts only duplicates")
	}
	if !r.tgt.HasHWLag() {
		res.Note("hw_lag", "hw_lag is measured inside the embedded core only; empty for "+r.tgt.Name())
	}
	r.faultsMu.Lock()
	sort.Slice(r.faults, func(a, b int) bool { return r.faults[a].i < r.faults[b].i })
	for _, f := range r.faults {
		res.Faults = append(res.Faults, f.f)
	}
	r.faultsMu.Unlock()
	r.hists = runHists{ack, hw, e2e, sd}
	return res
}

// runHists are the merged histograms, kept for writeOutputs.
type runHists struct{ ack, hw, e2e, sd *results.Histogram }

// writeOutputs writes the run's files through results.WriteRun: the .hgrm files (the
// client-observed HW lag's first, see externalResult), bench.txt, the plots and result.json;
// then report.html.
func (r *run) writeOutputs(res *results.Result, tl *timeline) error {
	h := r.hists
	res.Files.Timeline = tl.path
	err := results.WriteRun(r.dir, res, results.RunFiles{
		Hgrms: append(r.clientHgrms, []results.NamedHistogram{{Name: "ack_latency.hgrm", H: h.ack},
			{Name: "hw_lag.hgrm", H: h.hw}, {Name: "e2e_latency.hgrm", H: h.e2e}, {Name: "send_delay.hgrm", H: h.sd}}...),
		Latency: []results.LatencySeries{{Name: "ack", H: h.ack}, {Name: "hw lag", H: h.hw},
			{Name: "e2e", H: h.e2e}, {Name: "send delay", H: h.sd}},
		Timeline:   tl.tl.Rows(),
		PlotFailed: func(err error) { r.notef("plot: %v", err) },
	})
	if err != nil {
		return err
	}
	return writeRunReport(r.dir)
}
