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
	// TimelineInterval is the timeline's period; default 1s (100ms for runs shorter than 10s).
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
	in := &runInput{spec: s, opts: o, dir: dir, id: filepath.Base(dir), startedAt: startedAt}
	func() {
		var ls loops
		// close's error: a kafka:// target's settings that could not be restored.
		defer func() { err = errors.Join(err, ls.close()) }()
		res, err = runPhases(ctx, in, &ls)
	}()
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

// runInput is what Run fixed before the phases: the spec, the options with their defaults,
// the run directory, the run id and the start time. Every phase reads it; none changes it.
type runInput struct {
	spec      *spec.Spec
	opts      Options
	dir       string
	id        string
	startedAt time.Time
}

// notef prints a note on Stderr unless the run is quiet.
func (in *runInput) notef(format string, args ...any) {
	if !in.opts.Quiet {
		fmt.Fprintf(in.opts.Stderr, format+"\n", args...)
	}
}

// kafkaTarget reports whether the run drives a kafka:// cluster.
func (in *runInput) kafkaTarget() bool { return strings.HasPrefix(in.opts.Target, "kafka://") }

// runPhases runs the phases of a run, each a function of the values the earlier ones
// returned (see the comment at the top of runner_setup.go). Whatever a phase starts that must
// end with the run is registered in ls, which Run closes on every path.
func runPhases(ctx context.Context, in *runInput, ls *loops) (*results.Result, error) {
	p, err := setup(ctx, in, ls)
	if err != nil {
		return nil, err
	}
	m, err := measure(ctx, in, p, ls)
	if err != nil {
		return nil, err
	}
	st, err := settle(ctx, in, p, m)
	if err != nil {
		return nil, err
	}
	v, err := verify(ctx, in, p, st)
	if err != nil {
		return nil, err
	}
	return report(in, p, m, st, v)
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

// coreSink takes the embedded core's callbacks, which broker goroutines make (synchronised
// with the runner only through sockets): the HW lag of each leader batch, kept when the batch
// was appended inside the measurement window, and the damaged batches the brokers found.
// Setup creates it before the target opens and publishes the window once the schedule is
// fixed; report reads it after the load.
type coreSink struct {
	win   atomic.Pointer[load.Window] // nil until the schedule is fixed: nothing is kept
	hwlag *results.Recorder
	// damage is what the brokers reported damaged (OnDamage).
	damage struct {
		sync.Mutex
		n     int64
		found []string // the first maxDamageFindings reports
	}
}

func newCoreSink() *coreSink { return &coreSink{hwlag: results.NewRecorder()} }

// maxDamageFindings bounds the damage reports kept for the notes (all are counted).
const maxDamageFindings = 20

// onDamage records a damaged batch a broker found (its goroutine: a short critical section,
// never blocking on the runner).
func (c *coreSink) onDamage(d broker.DamageReport) {
	c.damage.Lock()
	defer c.damage.Unlock()
	c.damage.n++
	if len(c.damage.found) < maxDamageFindings {
		c.damage.found = append(c.damage.found, d.String())
	}
}

// damageFindings records the damage reports in res (damage_found and notes.damage).
func (c *coreSink) damageFindings(res *results.Result) {
	c.damage.Lock()
	defer c.damage.Unlock()
	res.DamageFound = c.damage.n
	if c.damage.n == 0 {
		return
	}
	note := fmt.Sprintf("%d damaged batches found by the brokers: %s", c.damage.n, strings.Join(c.damage.found, "; "))
	if more := c.damage.n - int64(len(c.damage.found)); more > 0 {
		note += fmt.Sprintf("; and %d more", more)
	}
	res.Note("damage", note)
}

func (c *coreSink) onHWLag(lagNs, records int64) {
	w := c.win.Load()
	if w == nil {
		return
	}
	// A batch belongs to the window by its leader append time, as the producer-side
	// histograms go by intended send time: warm-up batches the HW passes later stay out.
	if appended := time.Now().UnixNano() - lagNs; w.In(appended) {
		c.hwlag.RecordNsN(lagNs, records)
	}
}
