package load

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
)

// HW lag as a client sees it, on any Kafka-protocol cluster. The producers (acks=1 or all)
// learn each record's offset from the produce response; an observer keeps one Fetch in flight
// to every partition leader, at the highest HW it has seen with fetch.max.wait.ms
// ObserverFetchMaxWait, MinBytes 1 and MaxBytes 1, so a leader answers as soon as its HW
// moves (a consumer fetch at the HW waits for records below the HW) or after the wait, with
// at most one record batch (the first one past the offset, whatever its size: KIP-74) and the
// HW of every partition it asked for; hw_observer.record_bytes is what that cost. A record's client
// HW lag is the time from its produce acknowledgement (hw_lag_client_us) and from its
// intended send time (hw_lag_client_send_us) to the first response whose HW is past its
// offset, weighted by record like the core's hw_lag_us; acks=all acknowledges after the HW
// passed the record, so its lag from the ack is 0 by construction (counted as seen before
// the ack) and the lag from the send is the interesting one.
//
// Resolution: an HW advance happens between the response before the one that shows it and
// that one; result.json hw_observer.resolution_us is the p99, over the responses that showed
// an advance, of the time since the previous response on the same connection (plus the
// response's one-way transit, which the client cannot see). On the embedded target the core
// measures the lag itself (hw_lag_us, leader append -> HW): both are reported, and they agree
// within the resolution and the append -> acknowledgement time.

// ObserverFetchMaxWait is the observer's fetch.max.wait.ms.
const ObserverFetchMaxWait = 5 * time.Millisecond

// observerRing is how many recent HW advances per partition are kept to place an
// acknowledgement that arrives after the HW passed its record.
const observerRing = 1024

// HWObserver watches the HW of every partition of one topic. Run drives the fetches (one
// goroutine per leader); Acked is called from the producers' promise goroutines; both meet
// under each partition's lock.
type HWObserver struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	Win   Window

	parts             []obsPart
	FromAck, FromSend *results.Recorder
	gaps              *results.Recorder // µs since the previous response, per response that showed an advance

	responses, advances, beforeAck, errs, bytes atomic.Int64
	lastErr                                     atomic.Pointer[string]
}

// obsPart is one partition: the highest HW seen, recent advances and the acknowledged records
// the HW has not yet been seen past.
type obsPart struct {
	mu      sync.Mutex
	hw      int64    // exclusive; -1 until the first response
	seen    []hwSeen // the last observerRing advances, hw ascending
	pending pendingRecs
}

type hwSeen struct{ hw, at int64 }

type pendingRec struct{ off, Ack, intended int64 }

// pendingRecs is a min-heap by offset.
type pendingRecs []pendingRec

func (h pendingRecs) Len() int           { return len(h) }
func (h pendingRecs) Less(i, j int) bool { return h[i].off < h[j].off }
func (h pendingRecs) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingRecs) Push(x any)        { *h = append(*h, x.(pendingRec)) }
func (h *pendingRecs) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// NewHWObserver watches topic's partitions starting from start[p] (the HWs before the load);
// conn should keep metadata fresh (kgo.MetadataMinAge), as leaders move under faults.
func NewHWObserver(conn []kgo.Opt, topic string, start []int64, win Window) (*HWObserver, error) {
	cl, err := newClient(roleObserver, conn...)
	if err != nil {
		return nil, err
	}
	o := &HWObserver{cl: cl, adm: kadm.NewClient(cl), topic: topic, Win: win, parts: make([]obsPart, len(start)),
		FromAck: results.NewRecorder(), FromSend: results.NewRecorder(), gaps: results.NewRecorder()}
	for i := range o.parts {
		o.parts[i].hw = start[i]
	}
	return o, nil
}

// Acked records that the record at offset of partition was acknowledged at ackNs (its
// intended send time intendedNs); records outside the measurement window are not counted.
func (o *HWObserver) Acked(partition int32, offset, ackNs, intendedNs int64) {
	if !o.Win.In(intendedNs) || partition < 0 || int(partition) >= len(o.parts) || offset < 0 {
		return
	}
	p := &o.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	if offset >= p.hw {
		heap.Push(&p.pending, pendingRec{offset, ackNs, intendedNs})
		return
	}
	// The HW passed it before its acknowledgement: at the first advance past it (or, older
	// than the ring, at the ring's first advance, an upper bound).
	if i := sort.Search(len(p.seen), func(i int) bool { return p.seen[i].hw > offset }); i < len(p.seen) {
		o.record(p.seen[i].at, ackNs, intendedNs)
	}
}

func (o *HWObserver) record(at, ackNs, intendedNs int64) {
	lag := at - ackNs
	if lag < 0 {
		o.beforeAck.Add(1)
		lag = 0
	}
	o.FromAck.RecordNs(lag)
	o.FromSend.RecordNs(at - intendedNs)
}

// observe applies one response's HW of a partition, seen at ns.
func (o *HWObserver) observe(partition int32, hw, ns int64) bool {
	if partition < 0 || int(partition) >= len(o.parts) {
		return false
	}
	p := &o.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.hw {
		return false
	}
	p.hw = hw
	if len(p.seen) == observerRing {
		copy(p.seen, p.seen[1:])
		p.seen = p.seen[:observerRing-1]
	}
	p.seen = append(p.seen, hwSeen{hw, ns})
	for len(p.pending) > 0 && p.pending[0].off < hw {
		r := heap.Pop(&p.pending).(pendingRec)
		o.record(ns, r.Ack, r.intended)
	}
	return true
}

// pendingCount is the number of acknowledged records whose HW advance was not seen yet.
func (o *HWObserver) pendingCount() int {
	n := 0
	for i := range o.parts {
		p := &o.parts[i]
		p.mu.Lock()
		n += len(p.pending)
		p.mu.Unlock()
	}
	return n
}

// Run fetches until ctx is done: it finds the partitions' leaders, runs one fetch loop per
// leader, and starts over from Metadata when a loop meets a leader change or an error.
func (o *HWObserver) Run(ctx context.Context) {
	for ctx.Err() == nil {
		leaders, err := o.leaders(ctx)
		if err != nil {
			o.fail(err)
			if !poll.Sleep(ctx, 50*time.Millisecond) {
				return
			}
			continue
		}
		gctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for id, ps := range leaders.parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cancel() // a loop that ends (leader moved, error) restarts them all
				o.fetchLoop(gctx, id, leaders.topicID, ps)
			}()
		}
		wg.Wait()
		cancel()
		if !poll.Sleep(ctx, 10*time.Millisecond) {
			return
		}
	}
}

type leaderMap struct {
	topicID [16]byte
	parts   map[int32][]int32 // leader -> partitions
}

func (o *HWObserver) leaders(ctx context.Context) (leaderMap, error) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := o.adm.Metadata(mctx, o.topic) // also tells the client the brokers' addresses
	if err != nil {
		return leaderMap{}, err
	}
	td, ok := md.Topics[o.topic]
	if !ok || td.Err != nil {
		return leaderMap{}, fmt.Errorf("metadata of %s: %v", o.topic, td.Err)
	}
	lm := leaderMap{topicID: td.ID, parts: map[int32][]int32{}}
	for _, p := range td.Partitions.Sorted() {
		if p.Err == nil && p.Leader >= 0 && int(p.Partition) < len(o.parts) {
			lm.parts[p.Leader] = append(lm.parts[p.Leader], p.Partition)
		}
	}
	if len(lm.parts) == 0 {
		return lm, fmt.Errorf("no partition of %s has a leader", o.topic)
	}
	return lm, nil
}

// fetchLoop keeps one fetch in flight to broker id for its partitions until ctx ends or the
// broker answers with an error for one of them (it may no longer lead it).
func (o *HWObserver) fetchLoop(ctx context.Context, id int32, topicID [16]byte, parts []int32) {
	b := o.cl.Broker(int(id))
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(ObserverFetchMaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = 1, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = o.topic, topicID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	last := time.Now().UnixNano()
	for ctx.Err() == nil {
		for i := range req.Topics[0].Partitions {
			rp := &req.Topics[0].Partitions[i]
			pp := &o.parts[rp.Partition]
			pp.mu.Lock()
			rp.FetchOffset = max(pp.hw, 0)
			pp.mu.Unlock()
		}
		kresp, err := b.Request(ctx, req)
		now := time.Now().UnixNano()
		if err != nil {
			if ctx.Err() == nil {
				o.fail(fmt.Errorf("fetch from broker %d: %w", id, err))
			}
			return
		}
		resp := kresp.(*kmsg.FetchResponse)
		o.responses.Add(1)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			o.fail(fmt.Errorf("fetch from broker %d: %w", id, err))
			return
		}
		advanced, bad := false, false
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					o.fail(fmt.Errorf("fetch %s-%d from broker %d: %w", o.topic, p.Partition, id, err))
					bad = true
					continue
				}
				o.bytes.Add(int64(len(p.RecordBatches)))
				if o.observe(p.Partition, p.HighWatermark, now) {
					advanced = true
				}
			}
		}
		if advanced {
			o.advances.Add(1)
			o.gaps.RecordNs(now - last)
		}
		last = now
		if bad {
			return
		}
	}
}

func (o *HWObserver) fail(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	o.errs.Add(1)
	s := err.Error()
	o.lastErr.Store(&s)
}

// finish waits (up to d) until every acknowledged record's HW advance was seen, then closes
// the observer's client; it returns how many were never seen.
func (o *HWObserver) Finish(ctx context.Context, stop func(), d time.Duration) int {
	poll.Until(ctx, d, 5*time.Millisecond, func() string {
		if n := o.pendingCount(); n > 0 {
			return fmt.Sprint(n)
		}
		return ""
	})
	stop()
	o.cl.Close()
	return o.pendingCount()
}

// summary is result.json hw_observer.
func (o *HWObserver) Summary(unseen int) *results.HWObserver {
	g := o.gaps.Snapshot()
	s := &results.HWObserver{
		FetchMaxWaitMs: int(ObserverFetchMaxWait / time.Millisecond),
		Responses:      o.responses.Load(), Advances: o.advances.Load(), RecordBytes: o.bytes.Load(),
		ResolutionUs: float64(g.Quantile(99)), WindowP50Us: float64(g.Quantile(50)),
		SeenBeforeAck: o.beforeAck.Load(), Unseen: int64(unseen), Errors: o.errs.Load(),
	}
	if e := o.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// Close closes the observer's client (after Run returned).
func (o *HWObserver) Close() { o.cl.Close() }
