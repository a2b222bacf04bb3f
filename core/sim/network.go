package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
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

// ctrlNode is the controller's end of a link in the network model (clients are -1).
const ctrlNode = -2

// errLost is what a broker's AlterPartition hears when its request or the answer was lost:
// REQUEST_TIMED_OUT after rpcTimeNs, the outcome unknown.
var errLost = fmt.Errorf("sim: AlterPartition request or answer lost: %w", kerr.RequestTimedOut)

// lost reports whether a controller request or answer is lost: always while n is cut from the
// controller, else one time in alterLossEvery while faults run (never once they healed).
func (s *Sim) lost(n *node) bool {
	return n.ctrlCut || (!s.healed && s.rng.IntN(alterLossEvery) == 0)
}

// alterLossEvery: one AlterPartition request or answer in alterLossEvery is lost while faults
// run.
const alterLossEvery = 8

// alterPartition carries the AlterPartition request of broker n's incarnation inc to the
// controller and the answer back (broker.Config.AlterPartition): each way delayed as a message
// between brokers (so it is reordered with fetches, metadata deliveries, produces and other
// ISR changes), and lost as lost says. A lost request or answer is answered REQUEST_TIMED_OUT
// rpcTimeNs after the request was sent, and the broker sends it again. The controller handles
// a request whenever it arrives, even after its sender died or the controller restarted: its
// broker, leader and partition epochs decide. An answer for an incarnation that ended is
// dropped; one for a paused broker waits for it to resume.
func (s *Sim) alterPartition(n *node, inc int, req controller.AlterPartitionRequest, answer func(controller.PartitionState, error)) {
	s.stats.AlterPartitions++
	sent := s.now
	timedOut := func(why string) {
		s.stats.AlterLost++
		s.tracef("broker %d: AlterPartition p%d isr=%v (partition epoch %d): %s", n.id, req.Partition, req.ISR, req.PartitionEpoch, why)
		s.at(max(s.now, sent+rpcTimeNs), func() {
			s.deliver(n, inc, func() { answer(controller.PartitionState{}, errLost) }, nil)
		})
	}
	if s.lost(n) {
		timedOut("request lost")
		return
	}
	s.at(s.now+s.delay(n.id, ctrlNode), func() {
		st, err := s.ctrl.AlterPartition(req)
		switch {
		case err != nil && errors.Is(err, controller.ErrMetadataLog):
			s.refused(err)
		case err != nil:
			s.tracef("controller: AlterPartition of broker %d p%d isr=%v: %v", n.id, req.Partition, req.ISR, err)
		default:
			s.tracef("controller: AlterPartition of broker %d p%d isr=%v: partition epoch %d", n.id, req.Partition, req.ISR, st.PartitionEpoch)
		}
		if s.lost(n) {
			timedOut("answer lost")
			return
		}
		at := s.now + s.delay(ctrlNode, n.id)
		if at > sent+rpcTimeNs {
			timedOut("answer too late")
			return
		}
		s.at(at, func() { s.deliver(n, inc, func() { answer(st, err) }, nil) })
	})
}
