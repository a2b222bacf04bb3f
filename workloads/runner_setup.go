package workloads

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// A run goes through five phases, each handing its value to the next: setup builds the rig
// (the target, the disk guard, the topic, the clients and the schedule: the runPlan); measure
// runs the load and the loops alongside it and returns the measurement; settle (heal, drain,
// wait for the replicas and the consumers) returns what it settled; verify (the durability
// checks) the verdict; report writes result.json and the other files from all of them.
// Everything a phase starts that must end with the run is registered in rig.loops, which do
// closes on every path.

// runPlan is what a run will do, fixed by setup before the load starts.
type runPlan struct {
	id        string
	startedAt time.Time
	seeds     []string
	// conn are the options every client starts from: the seeds and the target's security.
	conn []kgo.Opt
	// grouped: the consumers are members of consumers.group.id (else each reads every
	// partition from startOffs).
	grouped bool
	// startOffs is each partition's HW before the load (exclusive: the first offset the load
	// can write), where the read-back starts.
	startOffs []int64
	// base is the first producer id of this run.
	base uint32
	// The load runs from loadStart; the measurement window is [measureStart, measureEnd).
	loadStart, measureStart, measureEnd time.Time
	// sendFrom is each producer's (r.prods[i]) first send: loadStart staggered by a slot
	// fraction within its group so that the producers' schedules interleave.
	sendFrom []time.Time
	// faults: the spec has a fault schedule (settle waits for full ISRs again).
	faults bool
}

// setup opens the target and the admin client, checks the disk guard's floor, prepares the
// topic (and a kafka:// target's settings), creates the clients and fixes the schedule.
func (r *rig) setup(ctx context.Context, id string, startedAt time.Time) error {
	s := r.spec
	p := &r.plan
	p.id, p.startedAt, p.faults = id, startedAt, len(s.Faults) > 0
	// Cancellation (ctrl-C) must still clean up: the target is closed by loops.close.
	tgt, err := target.OpenTarget(ctx, r.opts.Target, s, target.TargetOptions{OnHWLag: r.onHWLag, OnDamage: r.onDamage, Log: r.opts.Stderr, Seed: rand.Uint64(), FS: r.opts.fs})
	if err != nil {
		return err
	}
	r.tgt, r.parts = tgt, target.Inspect(tgt)
	r.loops.onClose(func() {
		if r.opts.beforeClose != nil {
			r.opts.beforeClose(tgt)
		}
		if cerr := tgt.Close(); cerr != nil {
			r.notef("closing target: %v", cerr)
		}
	})
	// The disk guard: refuse to start below isrbench.min.free.disk, and stop the load when
	// the data dir's filesystem falls below it (see diskguard.go).
	if r.parts.DataDir != "" {
		r.guard = newDiskGuard(r.parts.DataDir, s.MinFreeDisk, r.opts.statFS)
		if err := r.guard.check(); err != nil {
			return err // no result: Run removes the empty run dir
		}
	}
	p.seeds = tgt.Seeds()
	p.conn = target.ClientOpts(p.seeds, target.TargetSecurity(tgt))
	admCl, err := kgo.NewClient(append(p.conn[:len(p.conn):len(p.conn)], kgo.MetadataMinAge(target.FreshMetadata))...)
	if err != nil {
		return err
	}
	r.loops.onClose(admCl.Close)
	r.adm = kadm.NewClient(admCl)
	r.loops.onClose(func() { r.restoreTarget(ctx) }) // before admCl.Close: also after a partial prepareTarget
	if err := r.prepareTarget(ctx, r.adm); err != nil {
		return err
	}
	if rr := r.parts.Replication; rr != nil {
		grace := time.Duration(s.Topic.Partitions*s.Topic.ReplicationFactor) * cluster.ApplyAllowance
		if why := waitFollowersFetching(ctx, rr, s.Topic.Name, 10*time.Second+grace); why != "" {
			r.notef("starting the load although not every follower is fetching yet: %s", why)
		}
	}
	if p.startOffs, err = target.ListOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, true); err != nil {
		return err
	}
	r.loops.onClose(r.closeClients)
	if err := r.joinGroup(ctx); err != nil {
		return err
	}
	if err := r.schedule(); err != nil {
		return err
	}
	r.tl, err = newTimeline(r, filepath.Join(r.dir, "timeline.csv"), p.measureStart, p.measureEnd)
	if err != nil {
		return err
	}
	r.loops.onClose(func() {
		if !r.tl.started.Load() {
			r.tl.f.Close() // the loop closes it once started
		}
	})
	p.base = r.idBase()
	if err := r.startObserver(ctx, p.conn, p.startOffs); err != nil {
		return err
	}
	r.loops.onClose(r.stopObserver)
	if err := r.startTxn(ctx); err != nil {
		return err
	}
	return r.newClients()
}

// joinGroup creates the group members: they join before the schedule is set, and the load
// starts once they own every partition (their first rebalance), so that they read it from
// its first record.
func (r *rig) joinGroup(ctx context.Context) error {
	s, p := r.spec, &r.plan
	p.grouped = s.Consumers.GroupID != ""
	if !p.grouped {
		return nil
	}
	changed := make(chan struct{}, 1)
	for i := 0; i < s.Consumers.Count; i++ {
		c, err := load.NewGroupConsumer(p.conn, s.Topic.Name, s.Topic.Partitions, s.Consumers, load.Window{}, func(uint32) bool { return false }, changed)
		if err != nil {
			return err
		}
		r.cons = append(r.cons, c)
	}
	if len(r.cons) > 0 {
		if err := load.WaitGroupAssigned(ctx, r.cons, s.Topic.Partitions, changed, 60*time.Second); err != nil {
			r.notef("consumer group %s: %v; starting the load anyway", s.Consumers.GroupID, err)
		}
	}
	return nil
}

// schedule fixes the load's start and the measurement window.
func (r *rig) schedule() error {
	p := &r.plan
	var err error
	if p.loadStart, err = r.loadStart(); err != nil {
		return err
	}
	p.measureStart = p.loadStart.Add(r.spec.Warmup)
	p.measureEnd = p.measureStart.Add(r.spec.Duration)
	r.win = load.Window{Start: p.measureStart.UnixNano(), End: p.measureEnd.UnixNano()}
	r.hwWin.Store(&r.win)
	return nil
}

// newClients creates this run's producers (each with its first send time) and the consumers
// that are not group members; the group members get the window.
func (r *rig) newClients() error {
	s, p := r.spec, &r.plan
	ids := map[uint32]bool{}
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
			pr, err := load.NewProducer(p.base+uint32(global), p.conn, g, s.Topic.Name, rate, r.win, r.opts.WaitMode, txnIDOf(g, global))
			if err != nil {
				return err // closeClients (in loops) closes what was opened
			}
			pr.Group, pr.Obs = gi, r.obs
			ids[pr.ID] = true
			r.prods = append(r.prods, pr)
			st := p.loadStart
			if g.Rate > 0 {
				st = st.Add(time.Duration(float64(i) * 1e9 / g.Rate))
			}
			p.sendFrom = append(p.sendFrom, st)
		}
	}
	ours := func(pid uint32) bool { return ids[pid] }
	if p.grouped {
		for _, c := range r.cons {
			c.Win, c.Ours = r.win, ours // created before the schedule: see joinGroup
		}
		return nil
	}
	for i := 0; i < s.Consumers.Count; i++ {
		c, err := load.NewConsumer(p.conn, s.Topic.Name, p.startOffs, r.win, ours, load.IsolationOpts(s.Consumers.IsolationLevel)...)
		if err != nil {
			return err
		}
		c.Peers = load.NewPeerClock(r.opts.Worker, p.base, r.producerTotal())
		r.cons = append(r.cons, c)
	}
	return nil
}
