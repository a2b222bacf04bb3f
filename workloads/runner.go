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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
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
	WaitMode load.WaitMode
	// TimelineInterval is the timeline's period; default 1s (for runs shorter than 10s 100ms,
	// or longer above 100 partitions: see sampleInterval).
	TimelineInterval time.Duration
	// Commit is recorded in env.commit (default: the binary's VCS revision).
	Commit string
	// Assume lists broker settings already in effect on a kafka:// target (ParseAssume):
	// the run neither changes them nor needs the brokers to report them.
	Assume map[string]string
	// Worker makes the run one worker of several (load.Worker); zero: the whole load.
	Worker load.Worker

	// session applies the spec's settings to a kafka:// target; Sweep sets one for all its
	// points, nil makes Run use its own (restored when it ends).
	session *target.ConfigSession

	// statFS replaces the disk guard's statfs (tests simulate a filling disk).
	statFS func(path string) (free, total uint64, err error)
	// fs is the embedded brokers' file system (tests fill it).
	fs vfs.FS
	// beforeClose, when set, is called with the target just before it is closed (tests read
	// the embedded cluster's whole-run cost counters).
	beforeClose func(target.Target)
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
func RunID(s *spec.Spec, now time.Time) string {
	b, _ := json.Marshal(s.Config()) // map keys are sorted: stable
	sum := sha256.Sum256(b)
	return now.UTC().Format("20060102-150405") + "-" + s.Name + "-" + hex.EncodeToString(sum[:3])
}

// Run runs one workload: start (or connect to) the target, create the topic, wait for full
// ISRs, run warm-up then measurement, drain, check durability, write the outputs into
// <OutDir>/<id>/ and return the result. The embedded cluster and its temp data dir are removed
// before Run returns, also on error and cancellation. A run whose clean elections lost
// acknowledged records returns its result and an error wrapping ErrDurability.
func Run(ctx context.Context, s *spec.Spec, o Options) (res *results.Result, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	o.lockWriters()
	if o.OutDir == "" {
		o.OutDir = filepath.Join("results", "runs")
	}
	if o.Target == "" {
		o.Target = s.TargetName()
	}
	if o.WaitMode == "" {
		o.WaitMode = load.DefaultWaitMode
	}
	if o.TimelineInterval <= 0 {
		o.TimelineInterval = time.Second
		if s.Duration < 10*time.Second {
			o.TimelineInterval = sampleInterval(100*time.Millisecond, s.Topic.Partitions, time.Second)
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
	if n := spec.EmbeddedOnlyFaults(s); n > 0 && o.Target != "embedded" {
		return nil, fmt.Errorf("spec %s has %d faults of kinds that need the embedded target (%s), not %s; use kind exec", s.Name, n, strings.Join(spec.EmbeddedFaultKinds(), ", "), o.Target)
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
	r := &rig{spec: s, opts: o, dir: dir, hwlag: results.NewRecorder()}
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

// rig is setup's value: the run's inputs (spec, options, run dir) and what setup fixed and
// opened for the later phases (the target, the clients, the plan, the loops). Only the
// runner's goroutine uses it, apart from hwWin and hwlag (the core's callbacks) and the
// producers' and consumers' own locks.
type rig struct {
	spec *spec.Spec
	opts Options
	dir  string
	tgt  target.Target
	// parts are tgt's optional parts (Inspector), fixed when it opened.
	parts target.Inspection
	win   load.Window
	// hwWin is win for the core's OnHWLag callbacks (broker goroutines, synchronised with the
	// runner only through sockets): published atomically.
	hwWin atomic.Pointer[load.Window]
	hwlag *results.Recorder // HW lag from the core, filtered to the window
	// damage is what the brokers reported damaged (OnDamage, from broker goroutines).
	damage struct {
		sync.Mutex
		n     int64
		found []string // the first maxDamageFindings reports
	}

	prods []*load.Producer
	cons  []*load.Consumer

	// External clusters and workers (runner_external.go).
	ownSession     *target.ConfigSession // the run's own settings session, restored at its end
	restoreErr     error
	targetSettings []results.TargetSetting
	targetNotes    []string
	obs            *load.HWObserver // client-observed HW lag; nil without acknowledged producers
	txn            *txnRig          // a transactional run's parts (runner_txn.go); nil otherwise
	obsStop        func()

	// What setup fixed and opened (runner_setup.go): the plan, the admin client, the disk
	// guard and the timeline; loops holds every loop and cleanup of every phase.
	plan  runPlan
	loops loops
	adm   *kadm.Client
	guard *diskGuard // nil without a local data dir
	tl    *timeline
}

// do runs the phases of the run (runner_setup.go), each handing its value to the next:
// setup builds the rig, measure returns the measurement, settle what it settled, verify the
// verdict, and report the result from all of them. Whatever a phase started is stopped and
// closed by loops.close on every path.
func (r *rig) do(ctx context.Context, id string, startedAt time.Time) (*results.Result, error) {
	defer r.loops.close()
	if err := r.setup(ctx, id, startedAt); err != nil {
		return nil, err
	}
	m, err := r.measure(ctx)
	if err != nil {
		return nil, err
	}
	st, err := r.settle(ctx, m)
	if err != nil {
		return nil, err
	}
	v, err := r.verify(ctx, st)
	if err != nil {
		return nil, err
	}
	return r.report(m, st, v)
}

// partitionErrors sums the producers' failed records by partition and error name (whole run).
func (r *rig) partitionErrors() map[int32]map[string]int64 {
	return load.PartitionErrors(r.prods)
}

// failedBetween counts failed records whose intended send time lies in [from, to] seconds
// after the start of measurement.
func (r *rig) failedBetween(from, to float64) int64 {
	lo := r.win.Start + int64(from*1e9)
	hi := r.win.Start + int64(to*1e9)
	return load.FailedBetween(r.prods, lo, hi)
}

// waitFollowersFetching waits (up to d) until every follower of the freshly created topic has
// fetched from its leader. A follower whose first fetch raced the leader's own metadata update
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) backs off replica.fetch.backoff.ms, as
// in Kafka, and its partition then waits for the fetcher's parked long poll: acks=all produces
// to it stall for up to backoff + replica.fetch.wait.max.ms (1.5 s by default). That belongs to
// topic creation, not to the workload, so the load starts after it. It returns what is still
// not fetching when d passes ("" when ready).
func waitFollowersFetching(ctx context.Context, rr target.ReplicationReadier, topic string, d time.Duration) string {
	return poll.Until(ctx, d, 5*time.Millisecond, func() string { return rr.ReplicationReady(topic) })
}

// diskGuardInterval is how often the disk guard checks the data dir's filesystem.
var diskGuardInterval = time.Second

func drainTimeout(s *spec.Spec) time.Duration {
	d := 30 * time.Second
	if t := time.Duration(s.Producers.DeliveryTimeoutMs) * time.Millisecond; t > 0 && t+5*time.Second < d {
		d = t + 5*time.Second
	}
	return d
}

func (r *rig) closeClients() {
	for _, p := range r.prods {
		p.Close()
	}
	for _, c := range r.cons {
		c.Close()
	}
	r.prods, r.cons = r.prods[:len(r.prods):len(r.prods)], r.cons[:len(r.cons):len(r.cons)]
}

// maxDamageFindings bounds the damage reports kept for the notes (all are counted).
const maxDamageFindings = 20

// onDamage records a damaged batch a broker found (its goroutine: a short critical section,
// never blocking on the runner).
func (r *rig) onDamage(d broker.DamageReport) {
	r.damage.Lock()
	defer r.damage.Unlock()
	r.damage.n++
	if len(r.damage.found) < maxDamageFindings {
		r.damage.found = append(r.damage.found, d.String())
	}
}

// damageFindings records the damage reports in res (damage_found and notes.damage).
func (r *rig) damageFindings(res *results.Result) {
	r.damage.Lock()
	defer r.damage.Unlock()
	res.DamageFound = r.damage.n
	if r.damage.n == 0 {
		return
	}
	note := fmt.Sprintf("%d damaged batches found by the brokers: %s", r.damage.n, strings.Join(r.damage.found, "; "))
	if more := r.damage.n - int64(len(r.damage.found)); more > 0 {
		note += fmt.Sprintf("; and %d more", more)
	}
	res.Note("damage", note)
}

func (r *rig) onHWLag(lagNs, records int64) {
	w := r.hwWin.Load()
	if w == nil {
		return
	}
	// A batch belongs to the window by its leader append time, as the producer-side
	// histograms go by intended send time: warm-up batches the HW passes later stay out.
	if appended := time.Now().UnixNano() - lagNs; w.In(appended) {
		r.hwlag.RecordNsN(lagNs, records)
	}
}

// waitConsumers waits until every consumer received everything below end, or d passed; it
// reports whether they all caught up.
func (r *rig) waitConsumers(ctx context.Context, end []int64, d time.Duration) bool {
	return poll.Until(ctx, d, 20*time.Millisecond, func() string {
		if r.spec.Consumers.GroupID != "" {
			if !load.GroupCaughtUp(r.cons, end) {
				return "the group is behind"
			}
			return ""
		}
		for _, c := range r.cons {
			if !c.CaughtUp(end) {
				return "a consumer is behind"
			}
		}
		return ""
	}) == ""
}
