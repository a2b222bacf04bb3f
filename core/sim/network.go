package sim

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/core/broker"
)

// msg is a delivery at a virtual time; seq orders deliveries at the same time.
type msg struct {
	at, seq int64
	fn      func()
}

type msgQueue []*msg

func (q msgQueue) Len() int { return len(q) }

func (q msgQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q msgQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *msgQueue) Push(x any) { *q = append(*q, x.(*msg)) }

func (q *msgQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	*q = old[:len(old)-1]
	return m
}

// noTransport: in Manual mode the simulator carries the fetchers' requests itself.
type noTransport struct{}

func (noTransport) Dial(context.Context, int32, int) (broker.FetchConn, error) {
	return nil, fmt.Errorf("sim: fetchers are driven by the simulator")
}

// delay is a one-way network delay from a to b.
func (s *Sim) delay(a, b int32) int64 {
	d := int64(50+s.rng.IntN(1500)) * int64(time.Microsecond)
	if s.rng.IntN(20) == 0 {
		d += int64(s.rng.IntN(200)) * int64(time.Millisecond) // an occasional slow delivery
	}
	return d + s.slow[pair(a, b)]
}

func pair(a, b int32) [2]int32 {
	if a > b {
		a, b = b, a
	}
	return [2]int32{a, b}
}

// at schedules fn at virtual time t.
func (s *Sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.queue, &msg{at: t, seq: s.seq, fn: fn})
}

// send delivers fn from broker a to broker b after the network delay, or, if they are
// partitioned, runs failed after the request timeout.
func (s *Sim) send(a, b int32, fn, failed func()) {
	if a != b && s.cut[pair(a, b)] {
		if failed != nil {
			s.at(s.now+rpcTimeNs, failed)
		}
		return
	}
	s.at(s.now+s.delay(a, b), fn)
}

// deliver runs fn on node n now if it runs the incarnation inc, holds it while n is
// paused, drops it when n restarted or is down (then failed runs, if set).
func (s *Sim) deliver(n *node, inc int, fn, failed func()) {
	switch {
	case !n.up() || n.inc != inc:
		if failed != nil {
			failed()
		}
	case n.paused:
		n.held = append(n.held, func() { s.deliver(n, inc, fn, failed) })
	default:
		fn()
	}
}
