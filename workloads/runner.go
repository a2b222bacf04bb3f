package workloads

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/netfetch"
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
	win  window
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
}

func (r *run) do(ctx context.Context, id string, startedAt time.Time) (*results.Result, error) {
	s := r.spec
	notef := func(format string, args ...any) {
		if !r.opts.Quiet {
			fmt.Fprintf(r.opts.Stderr, format+"\n", args...)
		}
	}
	// Cancellation (ctrl-C) must still clean up: the target is closed by the defer below.
	tgt, err := OpenTarget(ctx, r.opts.Target, s, TargetOptions{OnHWLag: r.onHWLag, Log: r.opts.Stderr, Seed: rand.Uint64(), fs: r.opts.fs})
	if err != nil {
		return nil, err
	}
	r.tgt = tgt
	defer func() {
		if cerr := tgt.Close(); cerr != nil {
			notef("closing target: %v", cerr)
		}
	}()
	// The disk guard: refuse to start below isrbench.min.free.disk, and stop the load when
	// the data dir's filesystem falls below it (see diskguard.go).
	var guard *diskGuard
	if dd, ok := tgt.(dataDirTarget); ok {
		guard = newDiskGuard(dd.DataDir(), s.Broker.MinFreeDisk, r.opts.statFS)
		if err := guard.check(); err != nil {
			return nil, err // no result: Run removes the empty run dir
		}
	}
	seeds := tgt.Seeds()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(freshMetadata))
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	defer r.restoreTarget(ctx) // before admCl.Close: also after a partial prepareTarget
	if err := r.prepareTarget(ctx, adm); err != nil {
		return nil, err
	}
	if rr, ok := tgt.(replicationReadier); ok {
		grace := time.Duration(s.Topic.Partitions*s.Topic.ReplicationFactor) * netfetch.ApplyAllowance
		if why := waitFollowersFetching(ctx, rr, s.Topic.Name, 10*time.Second+grace); why != "" {
			notef("starting the load although not every follower is fetching yet: %s", why)
		}
	}
	startOffs, err := listOffsets(ctx, adm, s.Topic.Name, s.Topic.Partitions, true)
	if err != nil {
		return nil, err
	}

	defer r.closeClients()
	// Group members join before the schedule is set: the load starts once they own every
	// partition (their first rebalance), so that they read it from its first record.
	grouped := s.Consumers.GroupID != ""
	groupChanged := make(chan struct{}, 1)
	if grouped {
		for i := 0; i < s.Consumers.Count; i++ {
			c, err := newGroupConsumer(seeds, s.Topic.Name, s.Topic.Partitions, s.Consumers, window{}, func(uint32) bool { return false }, groupChanged)
			if err != nil {
				return nil, err
			}
			r.cons = append(r.cons, c)
		}
		if len(r.cons) > 0 {
			if err := waitGroupAssigned(ctx, r.cons, s.Topic.Partitions, groupChanged, 60*time.Second); err != nil {
				notef("consumer group %s: %v; starting the load anyway", s.Consumers.GroupID, err)
			}
		}
	}

	// Schedule: load from loadStart, measurement [measureStart, measureEnd).
	loadStart, err := r.loadStart()
	if err != nil {
		return nil, err
	}
	measureStart := loadStart.Add(s.Warmup)
	measureEnd := measureStart.Add(s.Duration)
	r.win = window{start: measureStart.UnixNano(), end: measureEnd.UnixNano()}
	r.hwWin.Store(&r.win)

	tl, err := newTimeline(r, filepath.Join(r.dir, "timeline.csv"), measureStart, measureEnd)
	if err != nil {
		return nil, err
	}
	tlStarted := false
	defer func() {
		if !tlStarted {
			tl.f.Close() // loop closes it once started
		}
	}()
	base := r.idBase()
	if err := r.startObserver(ctx, seeds, startOffs); err != nil {
		return nil, err
	}
	defer r.stopObserver()
	ids := map[uint32]bool{}
	type startAt struct{ group, index int }
	var starts []startAt
	global := 0 // the producer's number across the groups (and the workers)
	for gi, g := range s.ProducerGroups() {
		for i := 0; i < g.Count; i, global = i+1, global+1 {
			if !r.opts.Worker.Owns(global) {
				continue
			}
			rate := 0.0
			if g.Count > 0 {
				rate = g.Rate / float64(g.Count)
			}
			p, err := newProducer(base+uint32(global), seeds, g, s.Topic.Name, rate, r.win, r.opts.WaitMode)
			if err != nil {
				return nil, err // the deferred closeClients closes what was opened
			}
			p.group, p.obs = gi, r.obs
			ids[p.id] = true
			r.prods = append(r.prods, p)
			starts = append(starts, startAt{gi, i})
		}
	}
	ours := func(pid uint32) bool { return ids[pid] }
	if grouped {
		for _, c := range r.cons {
			c.win, c.ours = r.win, ours // created before the schedule: see above
		}
	}
	for i := 0; !grouped && i < s.Consumers.Count; i++ {
		c, err := newConsumer(seeds, s.Topic.Name, startOffs, r.win, ours)
		if err != nil {
			return nil, err
		}
		c.peers = newPeerClock(r.opts.Worker, base, r.producerTotal())
		r.cons = append(r.cons, c)
	}
	// loadCtx ends the load early when the disk guard trips (its cause is the *LowDiskError).
	loadCtx, stopLoad := context.WithCancelCause(ctx)
	defer stopLoad(nil)
	consCtx, stopCons := context.WithCancel(ctx)
	var consWG sync.WaitGroup
	for _, c := range r.cons {
		consWG.Add(1)
		go func() { defer consWG.Done(); c.run(consCtx) }()
	}
	defer func() { stopCons(); consWG.Wait() }()
	var gp *groupProbe
	gpDone := make(chan struct{})
	if grouped && len(r.cons) > 0 {
		gp = newGroupProbe(s, tgt, adm)
		gpCtx, stopGP := context.WithCancel(ctx)
		defer func() { stopGP(); <-gpDone }()
		go func() {
			defer close(gpDone)
			t := time.NewTimer(time.Until(measureStart))
			defer t.Stop()
			select {
			case <-t.C:
			case <-gpCtx.Done():
				return
			}
			gp.markStart()
			lagCtx, stopLag := context.WithDeadline(gpCtx, measureEnd)
			defer stopLag()
			gp.sampleLag(lagCtx, time.Second)
		}()
	} else {
		close(gpDone)
	}

	// Producers, staggered by a slot fraction so their schedules interleave.
	var prodWG sync.WaitGroup
	prodErrs := make([]error, len(r.prods))
	for i, p := range r.prods {
		st := loadStart
		if g := s.ProducerGroups()[starts[i].group]; g.Rate > 0 {
			st = st.Add(time.Duration(float64(starts[i].index) * 1e9 / g.Rate))
		}
		prodWG.Add(1)
		go func() { defer prodWG.Done(); prodErrs[i] = p.run(loadCtx, st, measureEnd) }()
	}

	// Timeline, progress, faults and profiles run alongside.
	tlCtx, stopTL := context.WithCancel(ctx)
	tlDone := make(chan struct{})
	tlStarted = true
	go func() { defer close(tlDone); tl.loop(tlCtx) }()
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); r.runFaults(loadCtx, measureStart, measureEnd) }()
	guardCtx, stopGuard := context.WithCancel(loadCtx)
	guardDone := make(chan struct{})
	storageDone := make(chan struct{})
	if od, ok := tgt.(offlineLogDirs); ok {
		go func() {
			defer close(storageDone)
			watchStorage(guardCtx, od, 100*time.Millisecond, func(err error) { stopLoad(err) })
		}()
	} else {
		close(storageDone)
	}
	if guard != nil {
		go func() {
			defer close(guardDone)
			guard.loop(guardCtx, diskGuardInterval, func(err error) { stopLoad(err) })
		}()
	} else {
		close(guardDone)
	}
	defer func() { stopGuard(); <-guardDone }()
	var pt *partTimeline
	ptDone := make(chan struct{})
	ptCtx, stopPT := context.WithCancel(ctx)
	if ps, ok := tgt.(partitionSampler); ok {
		pt = newPartTimeline(r, ps, filepath.Join(r.dir, "partitions.csv"), measureStart)
		go func() { defer close(ptDone); pt.loop(ptCtx) }()
	} else {
		close(ptDone)
	}
	defer func() { stopPT(); <-ptDone }() // before closeClients (deferred earlier): pt reads r.prods

	var profFiles []string
	var profErr error
	profStop := func() {}
	if len(r.opts.Profile) > 0 {
		profStop = r.startProfilesAt(ctx, measureStart, measureEnd, &profFiles, &profErr)
	}
	cost := r.startCostAt(ctx, measureStart)
	defer cost.stop()

	prodWG.Wait()
	cost.stop()
	stopGuard()
	<-guardDone
	<-storageDone
	var storageErr *StorageError
	if cause := context.Cause(loadCtx); errors.Is(cause, ErrLowDisk) || errors.As(cause, &storageErr) {
		// Stop everything at once; the deferred Close removes the data dir.
		profStop()
		<-faultsDone
		stopTL()
		<-tlDone
		os.RemoveAll(r.dir) // no result (a partial timeline only): the disk is short already
		return nil, cause
	}
	profStop()
	<-faultsDone
	if h, ok := tgt.(healer); ok {
		restarted, err := h.HealAll()
		if len(restarted) > 0 {
			notef("end of measurement: restarted brokers %v still down from the fault schedule", restarted)
		}
		if err != nil {
			notef("healing faults: %v", err)
		}
	}
	for i, e := range prodErrs {
		if e != nil {
			stopTL()
			<-tlDone
			return nil, fmt.Errorf("producer %d: %w", i, e)
		}
	}
	// Drain: every record handed to the clients gets its promise (ack or error).
	drainCtx, cancelDrain := context.WithTimeout(ctx, drainTimeout(s))
	for _, p := range r.prods {
		if err := p.drain(drainCtx); err != nil {
			notef("producer %d: drain: %v (records still buffered were aborted)", p.id-base, err)
		}
	}
	cancelDrain()
	r.finishObserver(ctx)
	stopTL()
	<-tlDone
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(s.Faults) > 0 {
		// Give the healed cluster time to get every replica back in the ISR, so the replica
		// logs can be compared; the partition timeline keeps recording meanwhile.
		if _, err := ensureTopic(ctx, adm, s, r.topicConfigs(), 30*time.Second); err != nil {
			notef("after the faults: %v", err)
		}
	}
	if ps, ok := tgt.(partitionSampler); ok {
		if behind := waitReplicated(ctx, ps, s.Topic.Name, 30*time.Second); behind != "" {
			notef("replication not caught up before the read-back: %s", behind)
		}
	}
	stopPT()
	<-ptDone
	if pt != nil && pt.err != nil {
		notef("partition timeline: %v", pt.err)
	}

	// Let the consumers reach the HW, then check durability.
	endOffs, err := listOffsets(ctx, adm, s.Topic.Name, s.Topic.Partitions, true)
	if err != nil {
		return nil, err
	}
	const consumerCatchUp = 5 * time.Second
	consumersBehind := !r.waitConsumers(ctx, endOffs, consumerCatchUp)
	stopCons()
	consWG.Wait()
	// Retention may have deleted the oldest acknowledged records: settle it (embedded), then
	// read back from the log start where it is past the offsets listed before the load.
	if ra, ok := tgt.(retentionApplier); ok {
		ra.ApplyRetention()
	}
	logStarts, err := listOffsets(ctx, adm, s.Topic.Name, s.Topic.Partitions, false)
	if err != nil {
		return nil, err
	}
	readFrom := make([]int64, len(startOffs))
	for p := range startOffs {
		readFrom[p] = max(startOffs[p], min(logStarts[p], endOffs[p]))
	}
	verifyCtx, cancelVerify := context.WithTimeout(ctx, 60*time.Second)
	dc, byAcks, verr := checkDurability(verifyCtx, seeds, s.Topic.Name, startOffs, readFrom, endOffs, r.prods)
	cancelVerify()
	if verr != nil {
		notef("durability check: %v", verr)
	}
	if after, err := listOffsets(ctx, adm, s.Topic.Name, s.Topic.Partitions, false); err == nil {
		for p := range after {
			if after[p] > readFrom[p] {
				notef("durability check: log start of partition %d moved from %d to %d during the read-back (retention): records between may count as lost", p, readFrom[p], after[p])
			}
		}
	}

	res := r.result(id, startedAt, tl, dc, byAcks)
	if err := r.externalResult(res, measureStart); err != nil {
		return res, err
	}
	if gp != nil {
		<-gpDone
		res.Group = gp.result(r.cons, measureStart, measureEnd)
	}
	res.Cost = cost.cost(res.Produced.Records, r.tgt.Name() == "embedded", cpuProfileFile(profFiles))
	if consumersBehind {
		// e2e latency only has the records the consumers read: a stall at the end of the
		// run would otherwise pass unseen.
		res.Note("e2e_latency", fmt.Sprintf("consumers had not read up to the HW %v after the end of the run; records they had not received are missing from e2e_latency_us", consumerCatchUp))
		notef("e2e: consumers still behind the HW %v after the run; e2e_latency_us misses their unread records", consumerCatchUp)
	}
	if dc.Expired > 0 {
		res.Note("durability.expired", fmt.Sprintf("%d acknowledged records were deleted by retention (log.retention.bytes=%d, log.retention.ms=%d) before the read-back, which starts at the log start; they are not counted as lost", dc.Expired, s.Broker.LogRetentionBytes, s.Broker.LogRetentionMs))
	}
	if guard != nil {
		peak, minFree := guard.stats()
		res.Note("disk", fmt.Sprintf("data dir peak %s (%d bytes, sampled every %s), least free space %s, floor isrbench.min.free.disk=%s", humanBytes(peak), peak, diskGuardInterval, humanBytes(minFree), s.Broker.MinFreeDisk))
	}
	if rc, ok := tgt.(replicaChecker); ok {
		same, why, err := rc.ReplicasIdentical(s.Topic.Name)
		switch {
		case err != nil:
			notef("replica comparison: %v", err)
		case !same:
			notef("replicas differ: %s", why)
			res.Note("durability.replicas", why)
		}
		res.Durability.ReplicasIdentical = same
	}
	fr := &FaultsReport{ProducerGroups: r.groupFigures()}
	if rr, ok := tgt.(replicaRecords); ok {
		rep := checkReplicaLogs(rr, s.Topic.Name, readFrom, r.prods)
		rep.apply(res, fr)
		if rep.err != nil {
			notef("replica logs: %v", rep.err)
		}
		if !rep.identical {
			notef("replica logs differ: %s", rep.why)
		}
	}
	if why := lossExpected(s); why != "" {
		res.Durability.LossExpected = why // derived from the settings
		fr.LossExpected = why
	}
	if pt != nil {
		pt.summarize(res, fr)
		res.Files.Partitions = fr.PartitionsCSV
	}
	res.Files.Faults = FaultsReportFile
	if err := writeFaultsReport(r.dir, fr); err != nil {
		return res, err
	}
	res.Files.Profiles = profFiles
	if profErr != nil {
		notef("profiles: %v", profErr)
	}
	if err := r.writeOutputs(res, tl); err != nil {
		return res, err
	}
	if !r.opts.Quiet {
		if err := results.PrintSummary(r.opts.Stdout, res); err != nil {
			return res, err
		}
		fr.print(r.opts.Stdout)
		if guard != nil {
			peak, _ := guard.stats()
			fmt.Fprintf(r.opts.Stdout, "disk: data dir peak %s (log.retention.bytes=%d, log.segment.bytes=%d)\n", humanBytes(peak), s.Broker.LogRetentionBytes, s.Broker.LogSegmentBytes)
		}
		fmt.Fprintf(r.opts.Stdout, "results: %s (report.html)\n", r.dir)
	}
	if verr != nil {
		return res, fmt.Errorf("durability check incomplete: %w", verr)
	}
	if all := byAcks["all"]; all.Lost > 0 && lossExpected(s) == "" {
		return res, fmt.Errorf("%w: %d of %d acks=all records lost with clean elections only", ErrDurability, all.Lost, all.Acked)
	}
	return res, nil
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

// dataDirTarget is implemented by targets with a local data dir (embedded): the disk guard
// watches its filesystem.
type dataDirTarget interface{ DataDir() string }

// retentionApplier is implemented by targets that can run log retention on demand (embedded).
type retentionApplier interface{ ApplyRetention() }

// replicationReadier is implemented by targets that can tell whether every follower of the
// topic is fetching (embedded): "" when ready, else what is not.
type replicationReadier interface{ ReplicationReady(topic string) string }

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

// replicaChecker is implemented by targets that can compare replica logs (the embedded one).
type replicaChecker interface {
	ReplicasIdentical(topic string) (same bool, why string, err error)
}

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
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		if r.spec.Consumers.GroupID != "" {
			all = groupCaughtUp(r.cons, end)
		} else {
			for _, c := range r.cons {
				all = all && c.caughtUp(end)
			}
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

func (r *run) startProfilesAt(ctx context.Context, at, until time.Time, files *[]string, perr *error) (stop func()) {
	early := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-early:
			return
		}
		st, err := profileStarter(r.opts.Profile, filepath.Join(r.dir, "profiles"))
		if err != nil {
			*perr = err
		}
		if st == nil {
			return
		}
		// The profiles end with the measurement window, not when the load has drained.
		t.Reset(time.Until(until))
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-early:
		}
		f, err := st()
		*files = f
		if err != nil && *perr == nil {
			*perr = err
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(early) })
		<-done
	}
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

func (r *run) writeOutputs(res *results.Result, tl *timeline) error {
	h := r.hists
	write := func(name string, fn func(w io.Writer) error) (string, error) {
		p := filepath.Join(r.dir, name)
		f, err := os.Create(p)
		if err != nil {
			return "", err
		}
		if err := fn(f); err != nil {
			f.Close()
			return "", fmt.Errorf("%s: %w", p, err)
		}
		return p, f.Close()
	}
	for _, x := range []struct {
		name string
		h    *results.Histogram
	}{{"ack_latency.hgrm", h.ack}, {"hw_lag.hgrm", h.hw}, {"e2e_latency.hgrm", h.e2e}, {"send_delay.hgrm", h.sd}} {
		p, err := write(x.name, func(w io.Writer) error { return results.WriteHgrm(w, x.h) })
		if err != nil {
			return err
		}
		res.Files.Hgrm = append(res.Files.Hgrm, p)
	}
	res.Files.Timeline = tl.path
	p, err := write("bench.txt", func(w io.Writer) error { return results.WriteBench(w, res) })
	if err != nil {
		return err
	}
	res.Files.Bench = p
	// Plots are best effort: a failing plot is noted, not fatal.
	var series []results.LatencySeries
	for _, x := range []struct {
		n string
		h *results.Histogram
	}{{"ack", h.ack}, {"hw lag", h.hw}, {"e2e", h.e2e}, {"send delay", h.sd}} {
		if x.h.Count() > 0 {
			series = append(series, results.LatencySeries{Name: x.n, H: x.h})
		}
	}
	if len(series) > 0 {
		p := filepath.Join(r.dir, "latency.png")
		if err := results.PlotLatency(p, res.Name+" "+res.ID, series...); err == nil {
			res.Files.Plots = append(res.Files.Plots, p)
		} else if !r.opts.Quiet {
			fmt.Fprintf(r.opts.Stderr, "plot: %v\n", err)
		}
	}
	if rows := tl.tl.Rows(); len(rows) > 0 {
		p := filepath.Join(r.dir, "timeline.png")
		if err := results.PlotTimeline(p, res.Name+" "+res.ID, rows); err == nil {
			res.Files.Plots = append(res.Files.Plots, p)
		} else if !r.opts.Quiet {
			fmt.Fprintf(r.opts.Stderr, "plot: %v\n", err)
		}
	}
	sort.Strings(res.Files.Plots)
	if err := results.WriteResult(filepath.Join(r.dir, "result.json"), res); err != nil {
		return err
	}
	return writeRunReport(r.dir)
}
