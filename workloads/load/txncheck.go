package load

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
)

// CheckTransactions reads every partition back read_committed from start[p] (inclusive) to
// end[p] (exclusive: the LSO after the run, which has then reached the HW) and checks the
// transactional producers' transactions: each committed one seen whole, no record of an
// aborted one, a transaction of unknown outcome whole or not at all, and each record once.
// Records of other writers, and of producers that are not transactional, are ignored.
func CheckTransactions(ctx context.Context, conn []kgo.Opt, topic string, start, end []int64, prods []*Producer) results.TxnVerify {
	var v results.TxnVerify
	var txnProds []*Producer
	byID := map[uint32]int{}
	for _, p := range prods {
		if p.Transactional() {
			byID[p.ID] = len(txnProds)
			txnProds = append(txnProds, p)
		}
	}
	seen := make([]bitset, len(txnProds))
	err := ReadCommitted(ctx, conn, topic, start, end, func(_ int32, r *kgo.Record) {
		if r.Attrs.IsControl() {
			return
		}
		h, err := ParseHeader(r.Value)
		if err != nil {
			return
		}
		i, ok := byID[h.ProducerID]
		if !ok {
			return
		}
		if seen[i].set(h.Seq) {
			v.Duplicated++
		}
	})
	if err != nil {
		v.Error = err.Error()
	}
	for i, p := range txnProds {
		p.mu.Lock()
		for _, t := range p.txns {
			n := int64(0)
			for s := t.first; s < t.end; s++ {
				if seen[i].has(s) {
					n++
				}
			}
			size := int64(t.end - t.first)
			switch t.outcome {
			case txnCommitted:
				switch {
				case n == size:
					v.Whole++
					v.Visible += n
				case n == 0:
					v.MissingRecords += size
				default:
					v.Partial++
					v.MissingRecords += size - n
				}
			case txnAborted:
				v.AbortedSeen += n
			default: // unknown: all or nothing
				if n != 0 && n != size {
					v.Partial++
				}
			}
		}
		p.mu.Unlock()
	}
	v.Anomalies = v.Partial + v.MissingRecords + v.AbortedSeen + v.Duplicated
	return v
}

// ReadCommitted reads partitions [start[p], end[p]) of topic read_committed (control records
// kept, so that the read reaches end[p] whatever the last batch was) and calls fn for each
// record from this goroutine; it returns an error naming the partitions not read to their end
// when ctx ends first.
func ReadCommitted(ctx context.Context, conn []kgo.Opt, topic string, start, end []int64, fn func(p int32, r *kgo.Record)) error {
	offs := map[int32]kgo.Offset{}
	remaining := 0
	for p := range start {
		if end[p] > start[p] {
			offs[int32(p)] = kgo.NewOffset().At(start[p])
			remaining++
		}
	}
	if remaining == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append(conn[:len(conn):len(conn)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(200*time.Millisecond)), IsolationOpts("read_committed")...)...)
	if err != nil {
		return fmt.Errorf("reading back %s read_committed: %w", topic, err)
	}
	defer cl.Close()
	read := append([]int64(nil), start...)
	done := make([]bool, len(start))
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var left []string
			for p := range done {
				if !done[p] && end[p] > start[p] {
					left = append(left, fmt.Sprintf("%d at %d of [%d, %d)", p, read[p], start[p], end[p]))
				}
			}
			sort.Strings(left)
			return fmt.Errorf("reading back %s read_committed: partitions not read to their LSO: %s: %w", topic, strings.Join(left, "; "), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			p := int(r.Partition)
			if p >= len(end) || done[p] {
				return
			}
			if r.Offset >= end[p] { // past the end without a record at end-1 (skipped by the read)
				done[p] = true
				remaining--
				return
			}
			read[p] = r.Offset + 1
			fn(r.Partition, r)
			if r.Offset+1 >= end[p] {
				done[p] = true
				remaining--
			}
		})
	}
	return nil
}
