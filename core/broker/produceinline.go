package broker

import (
	"context"
	"sync"
	"time"

	"github.com/isrbench/isrbench/core/partition"
)

// AckWaiter completes acks=all produces on the goroutine that makes them complete
// (isrbench.produce.answer.inline): the one whose HW advance passes the last waiting batch
// (a follower's fetch), an ISR or leadership change, or the producer's own when the HW
// passed at once. That goroutine fills the outputs and calls the answer function the
// caller gave ProduceStart, so the response can be written without waking the producer's
// goroutine first (one scheduler round trip less per acknowledged request). The semantics
// are Produce's: the same CheckHW decides each partition, a timeout gives REQUEST_TIMED_OUT.
//
// An AckWaiter belongs to one goroutine (a connection's), which calls ProduceStart and then
// Wait before it starts the next produce; reusable, allocation-free once made.
type AckWaiter struct {
	waiter *partition.Waiter // its function is wake
	timer  *time.Timer       // Wait's timeout, reused
	done   chan struct{}     // capacity 1: the completer is done (answer returned)
	waits  [8]produceWait    // backing store of w.waits for small produces

	mu struct {
		sync.Mutex
		waiting bool // armed and not yet complete or expired
		w       ProduceWait
		answer  func()
		at      time.Time // when the completer finished
	}
}

// NewAckWaiter returns an idle AckWaiter.
func NewAckWaiter() *AckWaiter {
	a := &AckWaiter{done: make(chan struct{}, 1)}
	a.waiter = partition.NewWaiterFunc(a.wake)
	a.timer = time.NewTimer(time.Hour)
	a.timer.Stop()
	return a
}

// ProduceStart is Produce's first half for a caller that answers from the completing
// goroutine: it appends (after Config.ProduceDelay and ProduceSpin, as Produce) and, when
// acks=all partitions wait for the HW, arms a: answer will be called exactly once, when
// their waits are over, with the outputs filled, on the goroutine that completed them
// (possibly this one, before ProduceStart returns), unless Wait expires them first. answer
// must not block nor call into a's partitions' signals (it runs while an HW signal's
// registrations are locked). It returns whether the caller must call Wait (false: nothing
// waits, answer is not called, the outputs are final) and the time waited in the delay.
func (b *Broker) ProduceStart(ctx context.Context, acks int16, parts []ProducePartition, a *AckWaiter, answer func()) (wait bool, waited time.Duration) {
	waited = b.produceDelay(ctx, parts)
	waits := b.produceAppend(acks, parts, a.waits[:0], nil)
	if len(waits) == 0 {
		return false, waited
	}
	a.mu.Lock()
	a.mu.w = ProduceWait{parts: parts, waits: waits}
	a.mu.waiting, a.mu.answer = true, answer
	a.mu.Unlock()
	a.waiter.Reset(0)
	for k := range waits {
		r := waits[k].r
		r.WatchHW(a.waiter, 0, r.HWSeq())
	}
	a.wake() // what happened before the registrations
	return true, waited
}

// wake checks the waits and completes them when all are over (the Waiter's function: any
// goroutine, under the signalling HW signal's registration lock).
func (a *AckWaiter) wake() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.mu.waiting || !a.mu.w.Check() {
		return
	}
	a.mu.waiting = false
	a.mu.answer()
	a.mu.at = time.Now()
	a.done <- struct{}{}
}

// Wait blocks until the armed produce completed (answered true: the answer function ran and
// returned at answeredAt) or until timeout or ctx ends first: then the partitions still
// waiting get REQUEST_TIMED_OUT, answer is never called and the caller answers (answered
// false). Either way a is idle again afterwards.
func (a *AckWaiter) Wait(ctx context.Context, timeout time.Duration) (answered bool, answeredAt time.Time) {
	defer a.waiter.Unwatch()
	a.timer.Reset(timeout)
	select {
	case <-a.done:
		a.timer.Stop()
		return true, a.at()
	case <-a.timer.C:
	case <-ctx.Done():
		a.timer.Stop()
	}
	a.mu.Lock()
	if a.mu.waiting { // expired before it completed
		a.mu.waiting = false
		a.mu.w.Expire()
		a.mu.w, a.mu.answer = ProduceWait{}, nil
		a.mu.Unlock()
		return false, time.Time{}
	}
	a.mu.Unlock()
	<-a.done // completed meanwhile
	return true, a.at()
}

// at returns when the completer finished and forgets the produce.
func (a *AckWaiter) at() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := a.mu.at
	a.mu.w, a.mu.answer = ProduceWait{}, nil
	return at
}
