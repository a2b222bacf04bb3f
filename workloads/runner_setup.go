package workloads

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// setup opens the target and the admin client, checks the disk guard's floor, prepares the
// topic (and a kafka:// target's settings), runs the one-at-a-time probe, creates the clients
// and fixes the schedule.
func setup(ctx context.Context, in *runInput, ls *loops) (*prepared, error) {
	s := in.spec
	p := &prepared{sink: newCoreSink(), cl: &clients{}}
	// Cancellation (ctrl-C) must still clean up: the target is closed by ls.close.
	tgt, err := target.OpenTarget(ctx, in.opts.Target, s, target.TargetOptions{OnHWLag: p.sink.onHWLag, OnDamage: p.sink.onDamage, Log: in.opts.Stderr, Seed: rand.Uint64(), FS: in.opts.fs})
	if err != nil {
		return nil, err
	}
	ls.onClose(func() {
		if in.opts.beforeClose != nil {
			in.opts.beforeClose(tgt)
		}
		if cerr := tgt.Close(); cerr != nil {
			in.notef("closing target: %v", cerr)
		}
	})
	t := &openTarget{Target: tgt, parts: target.Inspect(tgt)}
	p.tgt = t
	// The disk guard: refuse to start below isrbench.min.free.disk, and stop the load when
	// the data dir's filesystem falls below it (see diskguard.go).
	if t.parts.DataDir != "" {
		p.guard = newDiskGuard(t.parts.DataDir, s.MinFreeDisk, in.opts.statFS)
		if err := p.guard.check(); err != nil {
			return nil, err // no result: Run removes the empty run dir
		}
	}
	t.conn = target.ClientOpts(tgt.Seeds(), target.TargetSecurity(tgt))
	admCl, err := kgo.NewClient(append(t.conn[:len(t.conn):len(t.conn)], kgo.MetadataMinAge(target.FreshMetadata))...)
	if err != nil {
		return nil, err
	}
	ls.onClose(admCl.Close)
	t.adm = kadm.NewClient(admCl)
	if p.tcfg, err = prepareTarget(ctx, in, t.adm, ls); err != nil {
		return nil, err
	}
	if rr := t.parts.Replication; rr != nil {
		grace := time.Duration(s.Topic.Partitions*s.Topic.ReplicationFactor) * cluster.ApplyAllowance
		if why := waitFollowersFetching(ctx, rr, s.Topic.Name, 10*time.Second+grace); why != "" {
			in.notef("starting the load although not every follower is fetching yet: %s", why)
		}
	}
	// The probe runs on the idle cluster, and its records lie before the start offsets.
	if p.probe, err = runProbe(ctx, in, t); err != nil {
		return nil, err
	}
	if p.startOffs, err = target.ListOffsets(ctx, t.adm, s.Topic.Name, s.Topic.Partitions, true); err != nil {
		return nil, err
	}
	ls.onClose(p.cl.close)
	if err := joinGroup(ctx, in, t.conn, p.cl); err != nil {
		return nil, err
	}
	if p.sched, err = newSchedule(in); err != nil {
		return nil, err
	}
	p.sink.win.Store(&p.sched.win)
	p.cl.base = in.opts.Worker.IDBase(s.Name, rand.Uint32())
	if p.obs, err = startObserver(ctx, in, tgt.Name(), t.conn, p.startOffs, p.sched.win, ls); err != nil {
		return nil, err
	}
	if p.txn, err = startTxn(ctx, in, t, p.startOffs, p.sched.win, ls); err != nil {
		return nil, err
	}
	return p, newClients(in, t.conn, p.startOffs, p.sched, p.obs, p.cl)
}

// joinGroup creates the group members: they join before the schedule is set, and the load
// starts once they own every partition (their first rebalance), so that they read it from
// its first record.
func joinGroup(ctx context.Context, in *runInput, conn []kgo.Opt, cl *clients) error {
	s := in.spec
	cl.grouped = s.Consumers.GroupID != ""
	if !cl.grouped {
		return nil
	}
	changed := make(chan struct{}, 1)
	for i := 0; i < s.Consumers.Count; i++ {
		c, err := load.NewGroupConsumer(conn, s.Topic.Name, s.Topic.Partitions, s.Consumers, load.Window{}, func(uint32) bool { return false }, changed)
		if err != nil {
			return err
		}
		cl.cons = append(cl.cons, c)
	}
	if len(cl.cons) > 0 {
		if err := load.WaitGroupAssigned(ctx, cl.cons, s.Topic.Partitions, changed, 60*time.Second); err != nil {
			in.notef("consumer group %s: %v; starting the load anyway", s.Consumers.GroupID, err)
		}
	}
	return nil
}

// newSchedule fixes the load's start and the measurement window.
func newSchedule(in *runInput) (schedule, error) {
	start, err := loadStart(in.opts.Worker)
	if err != nil {
		return schedule{}, err
	}
	sc := schedule{loadStart: start, measureStart: start.Add(in.spec.Warmup)}
	sc.measureEnd = sc.measureStart.Add(in.spec.Duration)
	sc.win = load.Window{Start: sc.measureStart.UnixNano(), End: sc.measureEnd.UnixNano()}
	return sc, nil
}

// newClients creates this run's producers (each with its first send time) and the consumers
// that are not group members; the group members get the window.
func newClients(in *runInput, conn []kgo.Opt, startOffs []int64, sc schedule, obs *hwObs, cl *clients) error {
	s := in.spec
	ids := map[uint32]bool{}
	global := 0 // the producer's number across the groups (and the workers)
	for gi, g := range s.ProducerGroups() {
		for i := 0; i < g.Count; i, global = i+1, global+1 {
			if !in.opts.Worker.Owns(global) {
				continue
			}
			rate := 0.0
			if g.Count > 0 {
				rate = g.Rate / float64(g.Count)
			}
			mode := in.opts.WaitMode
			if mode == "" {
				mode = load.WaitMode(g.Pacer)
			}
			pr, err := load.NewProducer(cl.base+uint32(global), conn, g, s.Topic.Name, rate, sc.win, mode, txnIDOf(g, global))
			if err != nil {
				return err // clients.close (in the loops) closes what was opened
			}
			pr.Group = gi
			if obs != nil {
				pr.Obs = obs.HWObserver
			}
			ids[pr.ID] = true
			cl.prods = append(cl.prods, pr)
			st := sc.loadStart
			if g.Rate > 0 {
				st = st.Add(time.Duration(float64(i) * 1e9 / g.Rate))
			}
			cl.sendFrom = append(cl.sendFrom, st)
		}
	}
	ours := func(pid uint32) bool { return ids[pid] }
	if cl.grouped {
		for _, c := range cl.cons {
			c.Win, c.Ours = sc.win, ours // created before the schedule: see joinGroup
		}
		return nil
	}
	for i := 0; i < s.Consumers.Count; i++ {
		c, err := load.NewConsumer(conn, s.Topic.Name, startOffs, sc.win, ours, load.IsolationOpts(s.Consumers.IsolationLevel)...)
		if err != nil {
			return err
		}
		c.Peers = load.NewPeerClock(in.opts.Worker, cl.base, producerTotal(in.spec))
		cl.cons = append(cl.cons, c)
	}
	return nil
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
