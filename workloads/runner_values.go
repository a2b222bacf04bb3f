package workloads

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// A run goes through five phases, each a function of the run's input (runInput) and of the
// values the earlier phases returned:
//
//	setup(in)                 -> prepared: the opened target, the clients, the schedule
//	measure(in, prepared)     -> measured: the load and the loops alongside it
//	settle(in, prepared, m)   -> settled:  healed, drained, end offsets, consumers caught up
//	verify(in, prepared, st)  -> verified: the read-back and the replica comparison
//	report(in, all of them)   -> result.json and the other files
//
// A value holds only what a later phase reads, and no phase changes an earlier one's value
// (the clients, observers and loops it holds keep their own state). Everything a phase starts
// that must end with the run is registered in the run's loops, which Run closes on every path.

// runInput is what Run fixed before the phases: the spec, the options with their defaults,
// the run directory, the run id and the start time. Every phase reads it; none changes it.
type runInput struct {
	spec      *spec.Spec
	opts      Options
	dir       string
	id        string
	startedAt time.Time
	// schedRefused is why the kernel refused the spec's sched.policy (result.json
	// notes.sched), "" when it took it.
	schedRefused string
}

// notef prints a note on Stderr unless the run is quiet.
func (in *runInput) notef(format string, args ...any) {
	if !in.opts.Quiet {
		fmt.Fprintf(in.opts.Stderr, format+"\n", args...)
	}
}

// kafkaTarget reports whether the run drives a kafka:// cluster.
func (in *runInput) kafkaTarget() bool { return strings.HasPrefix(in.opts.Target, "kafka://") }

// prepared is setup's value.
type prepared struct {
	tgt       *openTarget
	sink      *coreSink
	guard     *diskGuard // nil without a local data dir
	startOffs []int64    // each partition's HW before the load (exclusive): the read-back's start
	probe     *probed    // the one-at-a-time probe (runner_probe.go)
	sched     schedule
	cl        *clients
	obs       *hwObs       // the client HW observer; nil without one
	txn       *txnParts    // a transactional run's parts (runner_txn.go); nil otherwise
	tcfg      targetConfig // a kafka:// target's settings (runner_external.go)
}

// openTarget is the opened target and the way the run's clients reach it.
type openTarget struct {
	target.Target
	parts target.Inspection // the target's optional parts (Inspector), fixed when it opened
	conn  []kgo.Opt         // the options every client starts from: the seeds and the security
	adm   *kadm.Client
}

// schedule is when the load runs, fixed by setup before it starts: from loadStart, measured
// over [measureStart, measureEnd) (win, in Unix nanoseconds).
type schedule struct {
	loadStart, measureStart, measureEnd time.Time
	win                                 load.Window
}

// clients are the run's producers and consumers. Setup creates them; the producers' and
// consumers' own state is theirs (locks, atomics), the slices do not change after setup.
type clients struct {
	base     uint32 // the first producer id of this run
	prods    []*load.Producer
	sendFrom []time.Time // prods[i]'s first send: loadStart staggered within its group
	cons     []*load.Consumer
	grouped  bool // the consumers are members of consumers.group.id
}

// close closes every producer and consumer (the end of the run).
func (cl *clients) close() {
	for _, p := range cl.prods {
		p.Close()
	}
	for _, c := range cl.cons {
		c.Close()
	}
}

// producerByNumber is producer n (counted over every group from 0) of this worker, nil if
// another worker runs it.
func (cl *clients) producerByNumber(n int) *load.Producer {
	for _, p := range cl.prods {
		if p.ID == cl.base+uint32(n) {
			return p
		}
	}
	return nil
}

// targetConfig is what a kafka:// target was given: the settings applied and checked, and
// the notes of the check (both empty on the embedded target).
type targetConfig struct {
	settings []results.TargetSetting
	notes    []string
}

// hwObs is the client HW observer (load.HWObserver) and the loop running it. Settle finishes
// it (finish), the end of the run closes it otherwise; whichever comes first ends it.
type hwObs struct {
	*load.HWObserver
	loop  *loop
	ended bool
}

// txnParts is what setup started for a transactional run (prepared.txn).
type txnParts struct {
	lso      *load.LSOObserver
	lsoLoop  *loop
	lsoEnded bool // settle finished the observer, or the end of the run closed it
	// The pipeline: its members, the loop running them, the output topic and its end offsets
	// before the load (exclusive).
	pipes    []*load.Pipeline
	pipeLoop *loop
	outTopic string
	outStart []int64
}

// measured is measure's value: what ran alongside the load and what it left for settle and
// report. The loops are nil when not started; faults is written by the fault goroutines
// under its lock, the rest by measure's goroutine (profFiles and profErr by the profile loop,
// read after it stopped; tl and pt by their loops, read after settle stopped them).
type measured struct {
	prodErrs  []error // per producer (clients.prods), set when the load ends
	tl        *timeline
	pt        *partTimeline // nil when the target cannot sample partitions
	gp        *groupProbe   // nil without a consumer group
	cost      *costMeter
	faults    faultLog
	profFiles []string
	profErr   error
	// The loops settle and report stop or wait for.
	tlLoop, ptLoop, consLoop, gpLoop *loop
}

// settled is settle's value: the partitions' end offsets (HW, exclusive) after the load and
// whether the consumers had read up to them.
type settled struct {
	endOffs         []int64
	consumersBehind bool
	// obsUnseen counts the acknowledged records whose HW advance the client observer did not
	// see before it stopped.
	obsUnseen int
	txn       *txnSettled // a transactional run's (nil otherwise)
}

// txnSettled is what settle found of a transactional run (settled.txn): the LSO observer's
// unseen records and errors, whether the pipeline caught up, and why the benchmark topic's
// LSO had not reached its HW ("" when it had).
type txnSettled struct {
	lsoUnseen  int64
	lsoErrs    string
	pipeBehind bool
	lsoNotHW   string
}

// verified is verify's value: what the read-back and the replica comparison found.
type verified struct {
	// readFrom is where the read-back started in each partition (inclusive): the HW before
	// the load, or the log start where retention deleted past it.
	readFrom []int64
	dc       results.DurabilityCounts
	byAcks   map[string]results.DurabilityCounts
	// err is set when the read-back could not finish (the counts are then incomplete).
	err      error
	replicas *replicaReport
	// txn is the read_committed verdict of a transactional run (nil otherwise).
	txn *results.Transactions
}

// replicaReport is the verdict of the replica comparison after the run: the bytes (every ISR
// member's log identical to the leader's up to the HW, batch by batch, compared over the wire
// by internal/replicaverify as isrbench verify-replicas does: durability.replicas_identical)
// and, where the target can read its replica logs directly (embedded), the records (every
// running replica holds the leader's records from the read-back's start, none of the
// acknowledged ones missing: faults.json replica_logs).
type replicaReport struct {
	bytesSame bool
	bytesWhy  string // the divergences (and ISR replicas that could not be read), "; "-joined
	bytesErr  error  // the comparison could not run
	checked   string // the range compared and the replicas skipped

	records   bool // the records were compared (the target reads its replica logs)
	identical bool
	why       string
	nlogs     int   // replica logs read
	lost      int64 // acknowledged records below the HW missing from some running replica's log
	err       error
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
