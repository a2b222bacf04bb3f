package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// subscriber delivers the partition changes of one broker to fn, in order,
// from its own goroutine. Lock order: Controller.mu before subscriber.mu;
// fn runs with neither held.
type subscriber struct {
	c      *Controller
	broker int32
	fn     func(PartitionState)
	wake   chan struct{} // capacity 1: "queue non-empty or stopped"

	mu struct {
		sync.Mutex
		queue   []PartitionState // FIFO; queue[head:] are pending
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
// replica (leader or ISR or epochs), in change order; first, at subscription,
// with the current state of each such partition (ordered by topic name, then
// partition). Each subscriber has an unbounded FIFO queue and one delivery
// goroutine, so fn is never called under the controller lock and may call
// any Controller method (but not Sync for its own broker, which would wait
// for itself). A broker may have several subscriptions; each gets every
// change.
//
// cancel stops delivery: after it returns no new fn call starts (pending
// states are dropped). cancel does not wait for a call already running, so
// fn may call it; use Sync to wait for that. cancel is idempotent and safe
// for concurrent use.
func (c *Controller) Subscribe(broker int32, fn func(PartitionState)) (cancel func()) {
	s := &subscriber{c: c, broker: broker, fn: fn, wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return func() {}
	}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			if slices.Contains(t.parts[i].Replicas, broker) {
				s.push(&t.parts[i])
			}
		}
	}
	c.mu.subs[s] = struct{}{}
	c.mu.Unlock()
	go s.run()
	return s.stop
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

// notifyLocked enqueues st for every subscriber of a replica of st. Called
// with c.mu held, after each change, so every queue sees changes in order.
func (c *Controller) notifyLocked(st *PartitionState) {
	for s := range c.mu.subs {
		if slices.Contains(st.Replicas, s.broker) {
			s.push(st)
		}
	}
}

// push enqueues a private copy of st unless s is stopped.
func (s *subscriber) push(st *PartitionState) {
	s.mu.Lock()
	if s.mu.stopped {
		s.mu.Unlock()
		return
	}
	s.mu.queue = append(s.mu.queue, st.Clone())
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
		if s.mu.stopped {
			s.mu.exited = true
			s.releaseLocked()
			s.mu.Unlock()
			s.c.mu.Lock()
			delete(s.c.mu.subs, s)
			s.c.mu.Unlock()
			return
		}
		st := s.mu.queue[s.mu.head]
		s.mu.queue[s.mu.head] = PartitionState{}
		s.mu.head++
		if s.mu.head == len(s.mu.queue) {
			s.mu.queue, s.mu.head = s.mu.queue[:0], 0
		}
		s.mu.Unlock()

		s.fn(st)

		s.mu.Lock()
		s.mu.done++
		s.releaseLocked()
		s.mu.Unlock()
	}
}
