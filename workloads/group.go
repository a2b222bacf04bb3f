package workloads

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// groupMember is the group side of a consumer that joined consumers.group.id: the partitions
// it owns now and the generations it was assigned in (from kgo's rebalance callbacks, on
// kgo's group goroutine).
type groupMember struct {
	mu struct {
		sync.Mutex
		owned map[int32]bool
		gens  map[int32]time.Time // generation -> when this member was first assigned in it
	}
	changed chan struct{} // shared by the group's members: signalled (non-blocking) on every assignment change
}

// balancerFor maps consumers.group.balancer to kgo's balancer.
func balancerFor(name string) (kgo.GroupBalancer, error) {
	switch name {
	case "range", "":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, fmt.Errorf("consumers.group.balancer: %q; allowed range, roundrobin, sticky, cooperative-sticky", name)
}

// newGroupConsumer returns a member of spec.GroupID consuming topic (partitions
// partitions): it commits its position every auto.commit.interval.ms, and a partition
// without a committed offset starts at the first record written after the member was
// created (records before belong to no measurement). changed (shared by the members) is
// signalled on every assignment change.
func newGroupConsumer(conn []kgo.Opt, topic string, partitions int, spec spec.ConsumerSpec, win window, ours func(uint32) bool, changed chan struct{}) (*consumer, error) {
	bal, err := balancerFor(spec.GroupBalancer)
	if err != nil {
		return nil, err
	}
	m := &groupMember{changed: changed}
	m.mu.owned = map[int32]bool{}
	m.mu.gens = map[int32]time.Time{}
	var cl *kgo.Client
	update := func(ps map[string][]int32, add bool) {
		m.mu.Lock()
		for _, p := range ps[topic] {
			if add {
				m.mu.owned[p] = true
			} else {
				delete(m.mu.owned, p)
			}
		}
		if add && cl != nil {
			if _, gen := cl.GroupMetadata(); gen >= 0 {
				if _, ok := m.mu.gens[gen]; !ok {
					m.mu.gens[gen] = time.Now()
				}
			}
		}
		m.mu.Unlock()
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}
	cl, err = kgo.NewClient(append(conn[:len(conn):len(conn)],
		kgo.ConsumerGroup(spec.GroupID), kgo.ConsumeTopics(topic), kgo.Balancers(bal),
		kgo.AutoCommitInterval(time.Duration(spec.AutoCommitIntervalMs)*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(time.Now().UnixMilli())),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
	)...)
	if err != nil {
		return nil, err
	}
	c := &consumer{cl: cl, win: win, ours: ours, e2e: results.NewHistogram(), next: make([]atomic.Int64, partitions), member: m}
	for p := range c.next {
		c.next[p].Store(-1) // unknown until this member reads the partition
	}
	return c, nil
}

// groupCaughtUp reports whether the group's members together received everything below end
// (per partition, the member that read furthest).
func groupCaughtUp(cons []*consumer, end []int64) bool {
	for p, e := range end {
		best := int64(-1)
		for _, c := range cons {
			if p < len(c.next) {
				best = max(best, c.next[p].Load())
			}
		}
		if best < e && e > 0 {
			return false
		}
	}
	return true
}

// waitGroupAssigned waits (up to d) until the members own every partition between them;
// changed is the members' shared signal.
func waitGroupAssigned(ctx context.Context, cons []*consumer, partitions int, changed <-chan struct{}, d time.Duration) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		owned := map[int32]bool{}
		for _, c := range cons {
			c.member.mu.Lock()
			for p := range c.member.mu.owned {
				owned[p] = true
			}
			c.member.mu.Unlock()
		}
		if len(owned) >= partitions {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("the group's members own %d of %d partitions after %v", len(owned), partitions, d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// groupProbe measures a run's consumer group: rebalances during the measurement (from the
// embedded coordinator's counters where the target has them, else the generations the
// members saw) and the committed-offset lag, sampled every second.
type groupProbe struct {
	spec  *spec.Spec
	stats target.GroupStatser // nil: the target cannot read its coordinator's counters
	adm   *kadm.Client
	start group.Stats
	hasSt bool
	mu    struct {
		sync.Mutex
		lag []float64
	}
}

func newGroupProbe(s *spec.Spec, stats target.GroupStatser, adm *kadm.Client) *groupProbe {
	return &groupProbe{spec: s, stats: stats, adm: adm}
}

// markStart snapshots the coordinator's counters at the start of measurement.
func (g *groupProbe) markStart() {
	if gs := g.stats; gs != nil {
		g.start, g.hasSt = gs.GroupStats(g.spec.Consumers.GroupID)
	}
}

// sampleLag records the committed-offset lag every interval until ctx ends.
func (g *groupProbe) sampleLag(ctx context.Context, interval time.Duration) {
	everyTick(ctx, interval, func() bool {
		lag, err := g.lag(ctx)
		if err != nil {
			return true // a failed sample (coordinator moving) is skipped, not zero
		}
		g.mu.Lock()
		g.mu.lag = append(g.mu.lag, float64(lag))
		g.mu.Unlock()
		return true
	})
}

// lag is the sum over partitions of end offset - committed offset (the whole partition from
// its log start when nothing is committed).
func (g *groupProbe) lag(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topic := g.spec.Topic.Name
	committed, err := g.adm.FetchOffsets(ctx, g.spec.Consumers.GroupID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return 0, err
	}
	ends, err := g.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, err
	}
	starts, err := g.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, err
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		from := int64(0)
		if s, ok := starts.Lookup(topic, o.Partition); ok {
			from = s.Offset
		}
		if c, ok := committed.Lookup(topic, o.Partition); ok && c.At >= 0 {
			from = c.At
		}
		total += max(o.Offset-from, 0)
	})
	return total, nil
}

// result builds result.json's group section after the run; mStart, mEnd bound the
// measurement.
func (g *groupProbe) result(cons []*consumer, mStart, mEnd time.Time) *results.ConsumerGroup {
	s := g.spec
	out := &results.ConsumerGroup{ID: s.Consumers.GroupID, Members: len(cons), Balancer: s.Consumers.GroupBalancer}
	g.mu.Lock()
	out.CommittedLag = results.SummarizeValues(g.mu.lag)
	g.mu.Unlock()
	if gs := g.stats; gs != nil {
		if end, ok := gs.GroupStats(s.Consumers.GroupID); ok {
			out.Source = "coordinator"
			n := end.Rebalances
			if g.hasSt && end.Rebalances >= g.start.Rebalances {
				n = end.Rebalances - g.start.Rebalances // else the coordinator moved: its counters started anew
			}
			n = min(n, len(end.RebalanceMs))
			out.Rebalances = n
			out.RebalanceMs = results.SummarizeValues(end.RebalanceMs[len(end.RebalanceMs)-n:])
			return out
		}
	}
	out.Source = "clients"
	gens := map[int32]bool{}
	for _, c := range cons {
		c.member.mu.Lock()
		for gen, at := range c.member.mu.gens {
			if !at.Before(mStart) && at.Before(mEnd) {
				gens[gen] = true
			}
		}
		c.member.mu.Unlock()
	}
	out.Rebalances = len(gens)
	return out
}
