package load

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// The exactly-once pipeline (pipeline.enabled): each member is a kgo GroupTransactSession in
// group pipeline.group.id with transactional.id <pipeline.transactional.id>-n. It polls up
// to pipeline.max.poll.records records of the benchmark topic read_committed, begins a
// transaction, produces one transformed record per input record to the output topic, and
// ends the transaction, which commits the group's offsets in it (TxnOffsetCommit, KIP-447):
// a record is consumed exactly when its output is committed. A rebalance or an error aborts
// the transaction, and the input is read again from the committed offsets.
//
// Transform: the output record has the input's key and header, and every byte after the
// header inverted (the producers write zeros there), so CheckPipeline can tell an output from a
// copy and name its input.

// Pipeline is one pipeline member; Run is its goroutine, the counters are atomic and the
// progress is behind mu.
type Pipeline struct {
	sess      *kgo.GroupTransactSession
	out       string
	maxPoll   int
	Committed atomic.Int64 // transactions committed
	Aborted   atomic.Int64 // transactions aborted
	Errors    atomic.Int64 // produce and EndTxn errors
	mu        sync.Mutex
	next      []int64 // per input partition: next offset whose transaction committed, -1 before any
}

// NewPipeline creates member n of the pipeline ps reading topic (partitions partitions). The
// group starts at its committed offsets (the runner commits the HW before the load), else at
// the end of each partition.
func NewPipeline(conn []kgo.Opt, topic string, partitions int, ps spec.PipelineSpec, out string, n int, txnTimeout time.Duration) (*Pipeline, error) {
	var sess *kgo.GroupTransactSession
	var err error
	opts := append(append(conn[:len(conn):len(conn)],
		kgo.TransactionalID(spec.TransactionalID(ps.TxnID, n)),
		kgo.TransactionTimeout(txnTimeout),
		kgo.ConsumerGroup(ps.GroupID), kgo.ConsumeTopics(topic),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.DefaultProduceTopic(out),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
	), IsolationOpts(spec.ReadCommitted)...)
	// The session's client goroutines carry the role label, as newClient's.
	pprof.Do(context.Background(), pprof.Labels("role", rolePipeline), func(context.Context) {
		sess, err = kgo.NewGroupTransactSession(opts...)
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline member %d: %w", n, err)
	}
	p := &Pipeline{sess: sess, out: out, maxPoll: ps.MaxPollRecords, next: make([]int64, partitions)}
	for i := range p.next {
		p.next[i] = -1
	}
	return p, nil
}

// Run transforms until ctx ends; pprof label role=pipeline-client.
func (p *Pipeline) Run(ctx context.Context) {
	pprof.Do(ctx, pprof.Labels("role", rolePipeline), func(ctx context.Context) {
		for ctx.Err() == nil {
			fs := p.sess.PollRecords(ctx, p.maxPoll)
			if fs.IsClientClosed() {
				return
			}
			var in []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { in = append(in, r) })
			if len(in) > 0 {
				p.transact(ctx, in)
			}
		}
	})
}

// transact sends in's transformed records in one transaction with the group's offsets.
func (p *Pipeline) transact(ctx context.Context, in []*kgo.Record) {
	if err := p.sess.Begin(); err != nil {
		p.Errors.Add(1)
		return
	}
	for _, r := range in {
		if r.Attrs.IsControl() {
			continue // a commit or abort marker: its offset is consumed, nothing to transform
		}
		p.sess.Produce(ctx, &kgo.Record{Topic: p.out, Key: r.Key, Value: Transform(r.Value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				p.Errors.Add(1) // the session aborts the transaction
			}
		})
	}
	committed, err := p.sess.End(ctx, kgo.TryCommit)
	if err != nil {
		p.Errors.Add(1)
	}
	if !committed {
		p.Aborted.Add(1)
		return
	}
	p.Committed.Add(1)
	p.mu.Lock()
	for _, r := range in {
		if int(r.Partition) < len(p.next) {
			p.next[r.Partition] = max(p.next[r.Partition], r.Offset+1)
		}
	}
	p.mu.Unlock()
}

// Transform is the pipeline's transformation of a record value: the header kept, every later
// byte inverted.
func Transform(v []byte) []byte {
	out := append([]byte(nil), v...)
	for i := HeaderSize; i < len(out); i++ {
		out[i] = ^out[i]
	}
	return out
}

// PipelineCaughtUp reports whether the members together committed everything of
// [start[p], end[p]) (per input partition, the member that got furthest).
func PipelineCaughtUp(ps []*Pipeline, start, end []int64) bool {
	for part, e := range end {
		if part >= len(start) || e <= start[part] {
			continue
		}
		best := int64(-1)
		for _, p := range ps {
			p.mu.Lock()
			if part < len(p.next) {
				best = max(best, p.next[part])
			}
			p.mu.Unlock()
		}
		if best < e {
			return false
		}
	}
	return true
}

// PipelineCommitted is how many transactions the members have committed.
func PipelineCommitted(ps []*Pipeline) int64 {
	var n int64
	for _, p := range ps {
		n += p.Committed.Load()
	}
	return n
}

// Close leaves the group and closes the session's client.
func (p *Pipeline) Close() { p.sess.Close() }

// CheckPipeline reads the input topic read_committed over [inStart, inEnd) and the output
// topic over [outStart, outEnd) and checks that every input record of prods has exactly one
// transformed output (results.PipelineRun's counts; Committed and Aborted are the caller's).
func CheckPipeline(ctx context.Context, conn []kgo.Opt, in string, inStart, inEnd []int64, out string, outStart, outEnd []int64, prods []*Producer) results.PipelineRun {
	pr := results.PipelineRun{OutputTopic: out}
	ours := map[uint32]bool{}
	for _, p := range prods {
		ours[p.ID] = true
	}
	type key struct {
		pid uint32
		seq uint64
	}
	outputs := map[key]int{}
	err := ReadCommitted(ctx, conn, in, inStart, inEnd, func(_ int32, r *kgo.Record) {
		if r.Attrs.IsControl() {
			return
		}
		if h, err := ParseHeader(r.Value); err == nil && ours[h.ProducerID] {
			if _, dup := outputs[key{h.ProducerID, h.Seq}]; !dup {
				pr.Inputs++
				outputs[key{h.ProducerID, h.Seq}] = 0
			}
		}
	})
	if err == nil {
		err = ReadCommitted(ctx, conn, out, outStart, outEnd, func(_ int32, r *kgo.Record) {
			if r.Attrs.IsControl() {
				return
			}
			pr.Outputs++
			h, err := ParseHeader(r.Value)
			if err != nil || !transformed(r.Value) {
				pr.Malformed++
				return
			}
			k := key{h.ProducerID, h.Seq}
			n, ok := outputs[k]
			if !ok {
				pr.Malformed++ // no such input (or not a committed one)
				return
			}
			if n > 0 {
				pr.Duplicated++
			}
			outputs[k] = n + 1
		})
	}
	if err != nil {
		pr.Error = err.Error()
		return pr
	}
	for _, n := range outputs {
		if n == 0 {
			pr.Missing++
		}
	}
	return pr
}

// transformed reports whether v's bytes after the header are all inverted zeros.
func transformed(v []byte) bool {
	for _, b := range v[HeaderSize:] {
		if b != 0xff {
			return false
		}
	}
	return true
}
