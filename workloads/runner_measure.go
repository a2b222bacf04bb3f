package workloads

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/target"
)

// measure runs the load from the plan's loadStart to its measureEnd with the loops alongside
// it (consumers, the group probe, the timeline, the faults, the storage watch and the disk
// guard, the partition timeline, profiles and the cost meter), and returns when the producers
// are done and the fault schedule has ended. A run the disk guard or an offline log
// directory stopped early returns that cause (its run dir removed: there is no result).
func (r *rig) measure(ctx context.Context) (*measurement, error) {
	s, p := r.spec, &r.plan
	m := &measurement{}
	// loadCtx ends the load early when the disk guard trips (its cause is the *LowDiskError).
	loadCtx, stopLoad := context.WithCancelCause(ctx)
	r.loops.onClose(func() { stopLoad(nil) })
	cons := r.cons
	m.consLoop = r.loops.start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, c := range cons {
			wg.Go(func() { c.Run(ctx) })
		}
		wg.Wait()
	})
	if p.grouped && len(r.cons) > 0 {
		gp := newGroupProbe(s, r.parts.Groups, r.adm)
		m.gp = gp
		m.gpLoop = r.loops.start(ctx, func(ctx context.Context) {
			if !poll.At(ctx, p.measureStart) {
				return
			}
			gp.markStart()
			lagCtx, stopLag := context.WithDeadline(ctx, p.measureEnd)
			defer stopLag()
			gp.sampleLag(lagCtx, time.Second)
		})
	}

	// Producers, staggered by a slot fraction so their schedules interleave.
	var prodWG sync.WaitGroup
	m.prodErrs = make([]error, len(r.prods))
	for i, pr := range r.prods {
		prodWG.Go(func() { m.prodErrs[i] = pr.Run(loadCtx, p.sendFrom[i], p.measureEnd) })
	}

	// Timeline, progress, faults and profiles run alongside.
	m.tlLoop = r.loops.start(ctx, r.tl.loop)
	faults := r.loops.start(loadCtx, func(ctx context.Context) { r.runFaults(ctx, &m.faults, p.measureStart, p.measureEnd) })
	var storage, guard *loop
	if od := r.parts.LogDirs; od != nil {
		storage = r.loops.start(loadCtx, func(ctx context.Context) {
			watchStorage(ctx, od, 100*time.Millisecond, func(err error) { stopLoad(err) })
		})
	}
	if r.guard != nil {
		guard = r.loops.start(loadCtx, func(ctx context.Context) {
			r.guard.loop(ctx, diskGuardInterval, func(err error) { stopLoad(err) })
		})
	}
	if ps := r.parts.Partitions; ps != nil {
		m.pt = newPartTimeline(r, ps, filepath.Join(r.dir, "partitions.csv"), p.measureStart)
		m.ptLoop = r.loops.start(ctx, m.pt.loop) // stopped before closeClients: pt reads r.prods
	}
	var prof *loop
	if len(r.opts.Profile) > 0 {
		prof = r.loops.start(ctx, func(ctx context.Context) { r.captureProfiles(ctx, m) })
	}
	m.cost = r.startCostAt(ctx, p.measureStart)
	r.loops.onClose(m.cost.stop)

	prodWG.Wait()
	m.cost.stop()
	guard.stop()
	if r.guard != nil {
		r.guard.walk() // the data dir as the load left it (the loop may have skipped walks)
	}
	storage.stop()
	var storageErr *StorageError
	if cause := context.Cause(loadCtx); errors.Is(cause, ErrLowDisk) || errors.As(cause, &storageErr) {
		// Stop everything at once; closing the target removes the data dir.
		prof.stop()
		faults.wait()
		m.tlLoop.stop()
		os.RemoveAll(r.dir) // no result (a partial timeline only): the disk is short already
		return nil, cause
	}
	prof.stop()
	faults.wait()
	return m, nil
}

// measurement is measure's value: what ran alongside the load and what it left for settle and
// report. The loops are nil when not started; faults is written by the fault goroutines
// under its lock, the rest by measure's goroutine (profFiles and profErr by the profile loop,
// read after it stopped).
type measurement struct {
	prodErrs  []error       // per producer (rig.prods), set when the load ends
	pt        *partTimeline // nil when the target cannot sample partitions
	gp        *groupProbe   // nil without a consumer group
	cost      *costMeter
	faults    faultLog
	profFiles []string
	profErr   error
	// The loops settle and report stop or wait for.
	tlLoop, ptLoop, consLoop, gpLoop *loop
}

// captureProfiles takes the pprof profiles of --profile over the measurement window (not
// while the load drains) into <run dir>/profiles; it returns early when ctx ends.
func (r *rig) captureProfiles(ctx context.Context, m *measurement) {
	if !poll.At(ctx, r.plan.measureStart) {
		return
	}
	st, err := profileStarter(r.opts.Profile, filepath.Join(r.dir, "profiles"))
	if err != nil {
		m.profErr = err
	}
	if st == nil {
		return
	}
	poll.At(ctx, r.plan.measureEnd)
	f, err := st()
	m.profFiles = f
	if err != nil && m.profErr == nil {
		m.profErr = err
	}
}

// settled is what settle found: the partitions' end offsets (HW, exclusive) after the load and whether the
// consumers had read up to them.
type settled struct {
	endOffs         []int64
	consumersBehind bool
	// obsUnseen counts the acknowledged records whose HW advance the client observer did not
	// see before it stopped.
	obsUnseen int
}

// consumerCatchUp is how long settle lets the consumers reach the HW after the load.
const consumerCatchUp = 5 * time.Second

// settle brings the cluster to rest after the load: it heals what the fault schedule left
// broken, drains the producers (every record gets its ack or error), waits for full ISRs and
// committed leader logs, stops the timelines and lets the consumers reach the HW.
func (r *rig) settle(ctx context.Context, m *measurement) (settled, error) {
	s := r.spec
	if h := r.parts.Healer; h != nil {
		restarted, err := h.HealAll()
		if len(restarted) > 0 {
			r.notef("end of measurement: restarted brokers %v still down from the fault schedule", restarted)
		}
		if err != nil {
			r.notef("healing faults: %v", err)
		}
	}
	for i, e := range m.prodErrs {
		if e != nil {
			m.tlLoop.stop()
			return settled{}, fmt.Errorf("producer %d: %w", i, e)
		}
	}
	// Drain: every record handed to the clients gets its promise (ack or error).
	drainCtx, cancelDrain := context.WithTimeout(ctx, drainTimeout(s))
	for _, p := range r.prods {
		if err := p.Drain(drainCtx); err != nil {
			r.notef("producer %d: drain: %v (records still buffered were aborted)", p.ID-r.plan.base, err)
		}
	}
	cancelDrain()
	unseen := r.finishObserver(ctx)
	r.settleTxn(ctx)
	if ctx.Err() != nil {
		m.tlLoop.stop()
		return settled{}, ctx.Err()
	}
	if r.plan.faults {
		// Give the healed cluster time to get every replica back in the ISR, so the replica
		// logs can be compared; both timelines keep sampling meanwhile, so the ISR expansions
		// that heal the faults are counted however long the rejoin takes on a loaded machine.
		if _, err := target.EnsureTopic(ctx, r.adm, s, r.topicConfigs(), 30*time.Second); err != nil {
			r.notef("after the faults: %v", err)
		}
	}
	m.tlLoop.stop()
	if ps := r.parts.Partitions; ps != nil {
		if behind := waitReplicated(ctx, ps, s.Topic.Name, 30*time.Second); behind != "" {
			r.notef("replication not caught up before the read-back: %s", behind)
		}
	}
	m.ptLoop.stop()
	if m.pt != nil && m.pt.err != nil {
		r.notef("partition timeline: %v", m.pt.err)
	}

	// Let the consumers reach the HW, then check durability.
	endOffs, err := target.ListOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, true)
	if err != nil {
		return settled{}, err
	}
	behind := !r.waitConsumers(ctx, endOffs, consumerCatchUp)
	m.consLoop.stop()
	return settled{endOffs: endOffs, consumersBehind: behind, obsUnseen: unseen}, nil
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
