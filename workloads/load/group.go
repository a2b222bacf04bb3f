package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
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

// NewGroupConsumer returns a member of spec.GroupID consuming topic (partitions
// partitions): it commits its position every auto.commit.interval.ms, and a partition
// without a committed offset starts at the first record written after the member was
// created (records before belong to no measurement). changed (shared by the members) is
// signalled on every assignment change.
func NewGroupConsumer(conn []kgo.Opt, topic string, partitions int, spec spec.ConsumerSpec, win Window, ours func(uint32) bool, changed chan struct{}) (*Consumer, error) {
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
	cl, err = newClient(roleConsumer, append(append(conn[:len(conn):len(conn)],
		kgo.ConsumerGroup(spec.GroupID), kgo.ConsumeTopics(topic), kgo.Balancers(bal),
		kgo.AutoCommitInterval(time.Duration(spec.AutoCommitIntervalMs)*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(time.Now().UnixMilli())),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
	), IsolationOpts(spec.IsolationLevel)...)...)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cl: cl, Win: win, Ours: ours, E2E: results.NewHistogram(), next: make([]atomic.Int64, partitions), member: m}
	for p := range c.next {
		c.next[p].Store(-1) // unknown until this member reads the partition
	}
	return c, nil
}

// GroupCaughtUp reports whether the group's members together received everything below end
// (per partition, the member that read furthest).
func GroupCaughtUp(cons []*Consumer, end []int64) bool {
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

// WaitGroupAssigned waits (up to d) until the members own every partition between them;
// changed is the members' shared signal.
func WaitGroupAssigned(ctx context.Context, cons []*Consumer, partitions int, changed <-chan struct{}, d time.Duration) error {
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

// Generations adds to gens the group generations in which c, a group member, was first
// assigned partitions within [from, to) (from inclusive, to exclusive); nothing for a consumer
// outside a group.
func (c *Consumer) Generations(from, to time.Time, gens map[int32]bool) {
	if c.member == nil {
		return
	}
	c.member.mu.Lock()
	defer c.member.mu.Unlock()
	for gen, at := range c.member.mu.gens {
		if !at.Before(from) && at.Before(to) {
			gens[gen] = true
		}
	}
}
