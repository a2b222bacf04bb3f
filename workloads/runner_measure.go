package workloads

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// measure runs the load from the schedule's loadStart to its measureEnd with the loops
// alongside it (consumers, the group probe, the timeline, the faults, the storage watch and
// the disk guard, the partition timeline, profiles and the cost meter), and returns when the
// producers are done and the fault schedule has ended. A run the disk guard or an offline log
// directory stopped early returns that cause (its run dir removed: there is no result).
func measure(ctx context.Context, in *runInput, p *prepared, ls *loops) (*measured, error) {
	s, sc, cl := in.spec, p.sched, p.cl
	m := &measured{}
	var err error
	m.tl, err = newTimeline(s, p.tgt, cl.prods, p.hwInterval, in.opts.TimelineInterval, in.opts.Quiet, in.opts.Stderr,
		filepath.Join(in.dir, "timeline.csv"), sc.measureStart, sc.measureEnd)
	if err != nil {
		return nil, err
	}
	ls.onClose(func() {
		if !m.tl.started.Load() {
			m.tl.f.Close() // the loop closes it once started
		}
	})
	// loadCtx ends the load early when the disk guard trips (its cause is the *LowDiskError).
	loadCtx, stopLoad := context.WithCancelCause(ctx)
	ls.onClose(func() { stopLoad(nil) })
	m.consLoop = ls.start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, c := range cl.cons {
			wg.Go(func() { c.Run(ctx) })
		}
		wg.Wait()
	})
	if cl.grouped && len(cl.cons) > 0 {
		gp := newGroupProbe(s, p.tgt.parts.Groups, p.tgt.adm)
		m.gp = gp
		m.gpLoop = ls.start(ctx, func(ctx context.Context) {
			if !poll.At(ctx, sc.measureStart) {
				return
			}
			gp.markStart()
			lagCtx, stopLag := context.WithDeadline(ctx, sc.measureEnd)
			defer stopLag()
			gp.sampleLag(lagCtx, time.Second)
		})
	}

	// Producers, staggered by a slot fraction so their schedules interleave.
	var prodWG sync.WaitGroup
	m.prodErrs = make([]error, len(cl.prods))
	for i, pr := range cl.prods {
		prodWG.Go(func() { m.prodErrs[i] = pr.Run(loadCtx, cl.sendFrom[i], sc.measureEnd) })
	}

	// Timeline, progress, faults and profiles run alongside.
	m.tlLoop = ls.start(ctx, m.tl.loop)
	fr := &faultRunner{in: in, tgt: p.tgt, cl: cl, log: &m.faults, measureStart: sc.measureStart, measureEnd: sc.measureEnd}
	faults := ls.start(loadCtx, fr.runAll)
	var storage, guard *loop
	if od := p.tgt.parts.LogDirs; od != nil {
		storage = ls.start(loadCtx, func(ctx context.Context) {
			watchStorage(ctx, od, 100*time.Millisecond, func(err error) { stopLoad(err) })
		})
	}
	if p.guard != nil {
		guard = ls.start(loadCtx, func(ctx context.Context) {
			p.guard.loop(ctx, diskGuardInterval, func(err error) { stopLoad(err) })
		})
	}
	if ps := p.tgt.parts.Partitions; ps != nil {
		m.pt = newPartTimeline(s, cl.prods, ps, filepath.Join(in.dir, "partitions.csv"), sc.measureStart)
		m.ptLoop = ls.start(ctx, m.pt.loop) // stopped before the clients close: pt reads the producers
	}
	var prof *loop
	if len(in.opts.Profile) > 0 {
		prof = ls.start(ctx, func(ctx context.Context) { m.captureProfiles(ctx, in, sc) })
	}
	cc, _ := p.tgt.Target.(target.CostCounter)
	m.cost = startCostAt(ctx, sc.measureStart, in.opts.Profile, cc)
	ls.onClose(m.cost.stop)

	prodWG.Wait()
	m.cost.stop()
	guard.stop()
	if p.guard != nil {
		p.guard.walk() // the data dir as the load left it (the loop may have skipped walks)
	}
	storage.stop()
	var storageErr *StorageError
	if cause := context.Cause(loadCtx); errors.Is(cause, ErrLowDisk) || errors.As(cause, &storageErr) {
		// Stop everything at once; closing the target removes the data dir.
		prof.stop()
		faults.wait()
		m.tlLoop.stop()
		os.RemoveAll(in.dir) // no result (a partial timeline only): the disk is short already
		return nil, cause
	}
	prof.stop()
	faults.wait()
	return m, nil
}

// captureProfiles takes the pprof profiles of --profile over the measurement window (not
// while the load drains) into <run dir>/profiles; it returns early when ctx ends.
func (m *measured) captureProfiles(ctx context.Context, in *runInput, sc schedule) {
	if !poll.At(ctx, sc.measureStart) {
		return
	}
	st, err := profileStarter(in.opts.Profile, filepath.Join(in.dir, "profiles"))
	if err != nil {
		m.profErr = err
	}
	if st == nil {
		return
	}
	poll.At(ctx, sc.measureEnd)
	f, err := st()
	m.profFiles = f
	if err != nil && m.profErr == nil {
		m.profErr = err
	}
}

// consumerCatchUp is how long settle lets the consumers reach the HW after the load.
const consumerCatchUp = 5 * time.Second

// settle brings the cluster to rest after the load: it heals what the fault schedule left
// broken, drains the producers (every record gets its ack or error), waits for full ISRs and
// committed leader logs, stops the timelines and lets the consumers reach the HW.
func settle(ctx context.Context, in *runInput, p *prepared, m *measured) (*settled, error) {
	s, t := in.spec, p.tgt
	if h := t.parts.Healer; h != nil {
		restarted, err := h.HealAll()
		if len(restarted) > 0 {
			in.notef("end of measurement: restarted brokers %v still down from the fault schedule", restarted)
		}
		if err != nil {
			in.notef("healing faults: %v", err)
		}
	}
	for i, e := range m.prodErrs {
		if e != nil {
			m.tlLoop.stop()
			return nil, fmt.Errorf("producer %d: %w", i, e)
		}
	}
	// Drain: every record handed to the clients gets its promise (ack or error).
	drainCtx, cancelDrain := context.WithTimeout(ctx, drainTimeout(s))
	for _, pr := range p.cl.prods {
		if err := pr.Drain(drainCtx); err != nil {
			in.notef("producer %d: drain: %v (records still buffered were aborted)", pr.ID-p.cl.base, err)
		}
	}
	cancelDrain()
	st := &settled{obsUnseen: p.obs.finish(ctx)}
	st.txn = settleTxn(ctx, in, t.adm, p.startOffs, p.txn)
	if ctx.Err() != nil {
		m.tlLoop.stop()
		return nil, ctx.Err()
	}
	if len(s.Faults) > 0 {
		// Give the healed cluster time to get every replica back in the ISR, so the replica
		// logs can be compared; both timelines keep sampling meanwhile, so the ISR expansions
		// that heal the faults are counted however long the rejoin takes on a loaded machine.
		if _, err := target.EnsureTopic(ctx, t.adm, s, topicConfigs(in), 30*time.Second); err != nil {
			in.notef("after the faults: %v", err)
		}
	}
	m.tlLoop.stop()
	if ps := t.parts.Partitions; ps != nil {
		if behind := waitReplicated(ctx, ps, s.Topic.Name, 30*time.Second); behind != "" {
			in.notef("replication not caught up before the read-back: %s", behind)
		}
	}
	m.ptLoop.stop()
	if m.pt != nil && m.pt.err != nil {
		in.notef("partition timeline: %v", m.pt.err)
	}

	// Let the consumers reach the HW, then check durability.
	var err error
	if st.endOffs, err = target.ListOffsets(ctx, t.adm, s.Topic.Name, s.Topic.Partitions, true); err != nil {
		return nil, err
	}
	st.consumersBehind = !waitConsumers(ctx, p.cl, st.endOffs, consumerCatchUp)
	m.consLoop.stop()
	return st, nil
}

// waitConsumers waits until every consumer received everything below end, or d passed; it
// reports whether they all caught up.
func waitConsumers(ctx context.Context, cl *clients, end []int64, d time.Duration) bool {
	return poll.Until(ctx, d, 20*time.Millisecond, func() string {
		if cl.grouped {
			if !load.GroupCaughtUp(cl.cons, end) {
				return "the group is behind"
			}
			return ""
		}
		for _, c := range cl.cons {
			if !c.CaughtUp(end) {
				return "a consumer is behind"
			}
		}
		return ""
	}) == ""
}

// waitReplicated waits (up to d) until every partition with a leader has its HW at the
// leader's LEO, i.e. every record the leaders appended (acks=1 ones included) is committed,
// so the read-back up to the HW sees them. It returns a description of what is still behind.
func waitReplicated(ctx context.Context, ps target.PartitionSampler, topic string, d time.Duration) string {
	return poll.Until(ctx, d, 20*time.Millisecond, func() string {
		ss, err := ps.SamplePartitions(topic)
		if err != nil {
			return err.Error()
		}
		for _, s := range ss {
			if s.Leader < 0 {
				continue
			}
			if leo, ok := s.LEO[s.Leader]; ok && s.HW < leo {
				return fmt.Sprintf("partition %d: HW %d < leader LEO %d", s.Partition, s.HW, leo)
			}
		}
		return ""
	})
}

// profileStarter starts pprof capture; stop returns the files written.
var profileStarter = func(kinds []string, dir string) (stop func() ([]string, error), err error) {
	s, err := profiles.Start(kinds, dir)
	if err != nil {
		return nil, err
	}
	return s.Stop, nil
}

func drainTimeout(s *spec.Spec) time.Duration {
	d := 30 * time.Second
	if t := time.Duration(s.Producers.DeliveryTimeoutMs) * time.Millisecond; t > 0 && t+5*time.Second < d {
		d = t + 5*time.Second
	}
	return d
}
