package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Update is one metadata change delivered to a subscriber, in commit order: exactly one of
// Partition, Topic and BrokerConfigs is set.
type Update struct {
	// Partition is a partition's new state (leader, epochs, ISR).
	Partition *PartitionState
	// Topic is a change of a topic as a whole: its configs, or its deletion.
	Topic *TopicUpdate
	// BrokerConfigs is a change of the subscriber broker's dynamic configs.
	BrokerConfigs *BrokerConfigUpdate
}

// BrokerConfigUpdate is a broker's dynamic configs after a change (ChangeBrokerConfig): the
// cluster-wide defaults overlaid by the broker's own, every key a dynamic broker config
// (DynamicBrokerConfigNames). A key absent takes the broker's static config.
type BrokerConfigUpdate struct {
	Configs map[string]string // private copy
}

// TopicUpdate is a topic-level change: the topic's config overrides after the change, or
// the topic's deletion.
type TopicUpdate struct {
	Name    string
	Configs map[string]string // private copy
	Deleted bool
}

// outMsg is a notification waiting for the operation's metadata records to be persisted.
type outMsg struct {
	u        Update
	replicas []int32 // brokers that get it
}

func (m outMsg) forBroker(id int32) bool { return slices.Contains(m.replicas, id) }

// subscriber delivers the changes of one broker to fn, in order,
// from its own goroutine (or from DeliverPending, with Config.ManualDelivery).
// Lock order: Controller.mu before subscriber.mu; fn runs with neither held.
type subscriber struct {
	c      *Controller
	broker int32
	fn     func(Update)
	batch  func([]Update) // SubscribeBatch's callback (fn is then nil)
	wake   chan struct{}  // capacity 1: "queue non-empty or stopped"

	mu struct {
		sync.Mutex
		queue   []Update // FIFO; queue[head:] are pending
		head    int
		stopped bool
		exited  bool
		// enq counts states ever enqueued; done counts those delivered or
		// dropped. Sync waits for done to reach the enq it saw.
		enq, done uint64
		waiters   []syncWaiter
	}
}

type syncWaiter struct {
	seq uint64
	ch  chan struct{}
}

// Subscribe calls fn with every change of a partition for which broker is a
// replica (leader or ISR or epochs or replicas; also the change of a reassignment
// that removes broker, so it deletes its replica), of such a partition's topic (configs,
// deletion) and of broker's dynamic configs, in change order; first, at
// subscription, with broker's dynamic configs (if any is set) and the current
// state of each such partition (ordered by topic name, then partition). Each subscriber has
// an unbounded FIFO queue and one delivery goroutine (none with
// Config.ManualDelivery: DeliverPending delivers), so fn is never called under the
// controller lock and may call any Controller method (but not Sync for its own
// broker, which would wait for itself). A broker may have several subscriptions;
// each gets every change. Changes are delivered only after they are durable in
// the metadata log.
//
// cancel stops delivery: after it returns no new fn call starts (pending
// states are dropped). cancel does not wait for a call already running, so
// fn may call it; use Sync to wait for that. cancel is idempotent and safe
// for concurrent use.
func (c *Controller) Subscribe(broker int32, fn func(Update)) (cancel func()) {
	return c.subscribe(&subscriber{c: c, broker: broker, fn: fn, wake: make(chan struct{}, 1)})
}

// SubscribeBatch is Subscribe with the changes delivered in batches: fn gets every change
// queued when it is called (at least one, in change order; with Config.ManualDelivery one
// at a time), so that a broker can apply the thousands of changes of one large topic
// creation together (one fsync of its new replicas instead of several each). The slice is
// fn's to keep. cancel does not stop a batch already being delivered.
func (c *Controller) SubscribeBatch(broker int32, fn func([]Update)) (cancel func()) {
	return c.subscribe(&subscriber{c: c, broker: broker, batch: fn, wake: make(chan struct{}, 1)})
}

func (c *Controller) subscribe(s *subscriber) (cancel func()) {
	broker := s.broker
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return func() {}
	}
	if bc := c.effectiveBrokerConfigsLocked(broker); len(bc) > 0 {
		s.push(Update{BrokerConfigs: &BrokerConfigUpdate{Configs: bc}})
	}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			if slices.Contains(t.parts[i].Replicas, broker) {
				st := t.parts[i].Clone()
				s.push(Update{Partition: &st})
			}
		}
	}
	c.mu.subs[s] = struct{}{}
	c.mu.Unlock()
	if !c.cfg.ManualDelivery {
		go s.run()
	}
	return s.stop
}

// DeliverPending delivers, on the caller's goroutine, up to max (<= 0: all) of the changes
// queued for broker's subscriptions, in order, and returns how many it delivered. Only with
// Config.ManualDelivery (the simulator decides when a broker learns of a change); a
// cancelled subscription delivers nothing and is forgotten.
func (c *Controller) DeliverPending(broker int32, max int) int {
	if !c.cfg.ManualDelivery {
		panic("BUG: controller.DeliverPending without Config.ManualDelivery")
	}
	c.mu.Lock()
	var subs []*subscriber
	for s := range c.mu.subs {
		if s.broker == broker {
			subs = append(subs, s)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, s := range subs {
		for max <= 0 || n < max {
			if !s.deliverOne() {
				break
			}
			n++
		}
	}
	return n
}

// Pending returns the number of changes queued for broker's subscriptions.
func (c *Controller) Pending(broker int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for s := range c.mu.subs {
		if s.broker == broker {
			s.mu.Lock()
			n += len(s.mu.queue) - s.mu.head
			s.mu.Unlock()
		}
	}
	return n
}

// deliverOne delivers the next queued change (manual delivery); false when none is queued
// or the subscription stopped (it is then forgotten).
func (s *subscriber) deliverOne() bool {
	s.mu.Lock()
	u, ok := s.takeLocked()
	if ok {
		s.deliver(u)
	}
	return ok
}

// takeLocked removes the next queued change from the queue and returns it, with mu held on
// entry and released on return. false when none is queued, or when the subscription
// stopped: it is then forgotten (exited, its Sync waiters released, removed from the
// controller's subscribers).
func (s *subscriber) takeLocked() (Update, bool) {
	if s.mu.stopped {
		s.mu.exited = true
		s.releaseLocked()
		s.mu.Unlock()
		s.c.mu.Lock()
		delete(s.c.mu.subs, s)
		s.c.mu.Unlock()
		return Update{}, false
	}
	if s.mu.head == len(s.mu.queue) {
		s.mu.Unlock()
		return Update{}, false
	}
	u := s.mu.queue[s.mu.head]
	s.mu.queue[s.mu.head] = Update{}
	s.mu.head++
	if s.mu.head == len(s.mu.queue) {
		s.mu.queue, s.mu.head = s.mu.queue[:0], 0
	}
	s.mu.Unlock()
	return u, true
}

// deliver calls fn with u (no lock held), then counts u delivered, releasing the Sync
// waiters that reached it.
func (s *subscriber) deliver(u Update) {
	if s.batch != nil {
		s.deliverBatch([]Update{u})
		return
	}
	s.fn(u)
	s.mu.Lock()
	s.mu.done++
	s.releaseLocked()
	s.mu.Unlock()
}

// deliverBatch calls the batch callback with us (no lock held), then counts them delivered.
func (s *subscriber) deliverBatch(us []Update) {
	s.batch(us)
	s.mu.Lock()
	s.mu.done += uint64(len(us))
	s.releaseLocked()
	s.mu.Unlock()
}

// takeAllLocked is takeLocked for every queued change (at least one when ok).
func (s *subscriber) takeAllLocked() ([]Update, bool) {
	if s.mu.stopped || s.mu.head == len(s.mu.queue) {
		u, ok := s.takeLocked()
		if !ok {
			return nil, false
		}
		return []Update{u}, true
	}
	us := slices.Clone(s.mu.queue[s.mu.head:])
	clear(s.mu.queue)
	s.mu.queue, s.mu.head = s.mu.queue[:0], 0
	s.mu.Unlock()
	return us, true
}

// Sync waits until every state enqueued so far for broker's subscribers
// (including cancelled ones still running fn) has been delivered, i.e. fn
// returned. It returns ctx's error if ctx ends first. It must not be called
// from a subscription callback of the same broker. Tests use it instead of
// sleeping.
func (c *Controller) Sync(ctx context.Context, broker int32) error {
	c.mu.Lock()
	var waits []chan struct{}
	for s := range c.mu.subs {
		if s.broker != broker {
			continue
		}
		s.mu.Lock()
		if !s.mu.exited && s.mu.done < s.mu.enq {
			ch := make(chan struct{})
			s.mu.waiters = append(s.mu.waiters, syncWaiter{s.mu.enq, ch})
			waits = append(waits, ch)
		}
		s.mu.Unlock()
	}
	c.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("controller: sync with broker %d subscribers: %w", broker, ctx.Err())
		}
	}
	return nil
}

// notifyLocked queues st for every subscriber of a replica of st and of the brokers also
// names (replicas the change removed), to be delivered once the operation's records are
// persisted (unlock). Called with c.mu held, after each change, so every queue sees changes
// in order.
func (c *Controller) notifyLocked(st *PartitionState, also ...int32) {
	cl := st.Clone()
	c.mu.outbox = append(c.mu.outbox, outMsg{u: Update{Partition: &cl}, replicas: append(slices.Clone(cl.Replicas), also...)})
}

// notifyTopicLocked queues a topic change for the brokers hosting any of t's partitions.
func (c *Controller) notifyTopicLocked(t *topicState, deleted bool) {
	var hosts []int32
	for i := range t.parts {
		for _, r := range t.parts[i].Replicas {
			if !slices.Contains(hosts, r) {
				hosts = append(hosts, r)
			}
		}
	}
	u := &TopicUpdate{Name: t.name, Configs: maps.Clone(t.configs), Deleted: deleted}
	c.mu.outbox = append(c.mu.outbox, outMsg{u: Update{Topic: u}, replicas: hosts})
}

// notifyBrokerConfigsLocked queues broker id's effective dynamic configs for its
// subscribers.
func (c *Controller) notifyBrokerConfigsLocked(id int32) {
	u := &BrokerConfigUpdate{Configs: c.effectiveBrokerConfigsLocked(id)}
	c.mu.outbox = append(c.mu.outbox, outMsg{u: Update{BrokerConfigs: u}, replicas: []int32{id}})
}

// push enqueues u unless s is stopped. u's contents are private to the subscriber.
func (s *subscriber) push(u Update) {
	s.mu.Lock()
	if s.mu.stopped {
		s.mu.Unlock()
		return
	}
	if u.Partition != nil {
		st := u.Partition.Clone()
		u.Partition = &st
	}
	if u.Topic != nil {
		t := *u.Topic
		t.Configs = maps.Clone(t.Configs)
		u.Topic = &t
	}
	if u.BrokerConfigs != nil {
		u.BrokerConfigs = &BrokerConfigUpdate{Configs: maps.Clone(u.BrokerConfigs.Configs)}
	}
	s.mu.queue = append(s.mu.queue, u)
	s.mu.enq++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) stop() {
	s.mu.Lock()
	if !s.mu.stopped {
		s.mu.stopped = true
		dropped := uint64(len(s.mu.queue) - s.mu.head)
		s.mu.queue, s.mu.head = nil, 0
		s.mu.done += dropped
		s.releaseLocked()
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// releaseLocked closes the Sync waiters whose sequence has been reached.
func (s *subscriber) releaseLocked() {
	kept := s.mu.waiters[:0]
	for _, w := range s.mu.waiters {
		if s.mu.exited || w.seq <= s.mu.done {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(s.mu.waiters[len(kept):])
	s.mu.waiters = kept
}

// run is the delivery goroutine.
func (s *subscriber) run() {
	for {
		s.mu.Lock()
		for !s.mu.stopped && s.mu.head == len(s.mu.queue) {
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		if s.batch != nil {
			us, ok := s.takeAllLocked()
			if !ok {
				return
			}
			s.deliverBatch(us)
			continue
		}
		u, ok := s.takeLocked() // a change is queued, or the subscription stopped
		if !ok {
			return
		}
		s.deliver(u)
	}
}
