package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
)

// LSO lag as a client sees it, on any Kafka-protocol cluster: the time from the HW passing a
// record to the last stable offset (LSO) passing it, weighted by record. An LSOObserver
// polls ListOffsets LATEST every LSOPollInterval, first read_committed (the LSO), then
// read_uncommitted (the HW), each one request the client shards to the partitions' leaders.
// Each HW advance [from, to) seen at time t is queued; when the LSO passes records of the
// queue at time u, each such record's lag is u - t. A record of a transaction is held below
// the LSO until its transaction ends (commit or abort), a record outside any transaction not
// at all. Both ends are seen at poll times, so lso_lag_us is measured to within the poll
// interval (result.json transactions.lso_lag_resolution_us). Records whose HW advance was seen
// from the start of measurement on count: the load stops sending at the window's end, so what
// the HW passes later is the window's backlog (producers behind their schedule).

// LSOPollInterval is how often the LSO observer lists the offsets.
const LSOPollInterval = 5 * time.Millisecond

// LSOObserver watches the HW and the LSO of every partition of one topic. Run polls (one
// goroutine); Lag is read after Finish.
type LSOObserver struct {
	cl    *kgo.Client
	topic string
	win   Window
	parts []lsoPart // Run's goroutine only, and Finish's after Run returned
	mu    sync.Mutex
	Lag   *results.Recorder

	polls, errs atomic.Int64
	lastErr     atomic.Pointer[string]
}

// lsoPart is one partition: the highest HW and LSO seen, and the HW advances the LSO has not
// passed yet, oldest first.
type lsoPart struct {
	hw, lso int64
	queue   []hwAdvance
}

type hwAdvance struct{ from, to, at int64 }

// NewLSOObserver watches topic's partitions from start[p] (the HW before the load, also the
// LSO then: the load is the only writer).
func NewLSOObserver(conn []kgo.Opt, topic string, start []int64, win Window) (*LSOObserver, error) {
	cl, err := newClient(roleObserver, conn...)
	if err != nil {
		return nil, err
	}
	o := &LSOObserver{cl: cl, topic: topic, win: win, parts: make([]lsoPart, len(start)), Lag: results.NewRecorder()}
	for i, s := range start {
		o.parts[i] = lsoPart{hw: s, lso: s}
	}
	return o, nil
}

// Run polls until ctx ends.
func (o *LSOObserver) Run(ctx context.Context) {
	for poll.Sleep(ctx, LSOPollInterval) {
		o.pollOnce(ctx)
	}
}

// pollOnce lists the LSO, then the HW, and applies both (the LSO first read is at most the HW
// read after it).
func (o *LSOObserver) pollOnce(ctx context.Context) {
	lso, err := o.list(ctx, 1)
	if err != nil {
		o.fail(err)
		return
	}
	hw, err := o.list(ctx, 0)
	if err != nil {
		o.fail(err)
		return
	}
	o.polls.Add(1)
	now := time.Now().UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	for p := range o.parts {
		if h, ok := hw[int32(p)]; ok {
			o.advanceHW(p, h, now)
		}
		if l, ok := lso[int32(p)]; ok {
			o.advanceLSO(p, l, now)
		}
	}
}

// list asks every leader for its partitions' LATEST offset at isolation level iso (0: the HW,
// 1: the LSO); partitions answered with an error are left out.
func (o *LSOObserver) list(ctx context.Context, iso int8) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = o.topic
	for p := range o.parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, o.cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var perr error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				perr = fmt.Errorf("list offsets %s-%d: %w", o.topic, p.Partition, err)
				continue
			}
			out[p.Partition] = p.Offset
		}
	}
	if perr != nil {
		o.fail(perr)
	}
	return out, nil
}

// advanceHW queues partition p's HW advance to hw seen at now (o.mu held).
func (o *LSOObserver) advanceHW(p int, hw, now int64) {
	lp := &o.parts[p]
	if hw <= lp.hw {
		return
	}
	lp.queue = append(lp.queue, hwAdvance{lp.hw, hw, now})
	lp.hw = hw
}

// advanceLSO records the lag of the queued records the LSO passed at now (o.mu held).
func (o *LSOObserver) advanceLSO(p int, lso, now int64) {
	lp := &o.parts[p]
	if lso <= lp.lso {
		return
	}
	lp.lso = lso
	n := 0
	for ; n < len(lp.queue); n++ {
		a := &lp.queue[n]
		if a.from >= lso {
			break
		}
		passed := min(a.to, lso) - a.from
		if a.at >= o.win.Start && passed > 0 {
			o.Lag.RecordNsN(now-a.at, passed)
		}
		a.from += passed
		if a.from < a.to {
			break
		}
	}
	lp.queue = lp.queue[n:]
}

// pending is the number of records the HW passed and the LSO did not yet (o.mu held).
func (o *LSOObserver) pending() int64 {
	var n int64
	for _, lp := range o.parts {
		for _, a := range lp.queue {
			n += a.to - a.from
		}
	}
	return n
}

func (o *LSOObserver) fail(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	o.errs.Add(1)
	s := err.Error()
	o.lastErr.Store(&s)
}

// Finish waits (up to d) until the LSO passed every record the HW passed, then stop ends Run
// and the client is closed; it returns how many records the LSO was not seen passing, and a
// description of the observer's errors ("" without).
func (o *LSOObserver) Finish(ctx context.Context, stop func(), d time.Duration) (unseen int64, errs string) {
	poll.Until(ctx, d, LSOPollInterval, func() string {
		o.mu.Lock()
		defer o.mu.Unlock()
		if n := o.pending(); n > 0 {
			return fmt.Sprint(n)
		}
		return ""
	})
	stop()
	o.cl.Close()
	o.mu.Lock()
	unseen = o.pending()
	o.mu.Unlock()
	if n := o.errs.Load(); n > 0 {
		errs = fmt.Sprintf("%d ListOffsets errors of %d polls (last: %s)", n, o.polls.Load()+n, *o.lastErr.Load())
	}
	return unseen, errs
}

// Close closes the observer's client (after Run returned).
func (o *LSOObserver) Close() { o.cl.Close() }
