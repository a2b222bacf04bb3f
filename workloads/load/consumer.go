package load

import (
	"context"
	"fmt"
	"math/bits"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
)

// Consumer reads every partition of the topic from the leader (kgo fetches from the leader
// unless a rack is configured) starting at the offsets snapshotted before the load started,
// and records end-to-end latency = receive time - intended send time for the records of this
// run's producers. One goroutine runs it; e2e is read after run returns.
type Consumer struct {
	cl   *kgo.Client
	Win  Window
	Ours func(pid uint32) bool
	E2E  *results.Histogram
	next []atomic.Int64 // per partition: next offset to read (exclusive end of what was received)
	// member is set for a member of a consumer group (newGroupConsumer).
	member *groupMember
	// peers, set for a worker of a multi-worker run, tracks every worker's least delay.
	Peers *PeerClock
}

func NewConsumer(conn []kgo.Opt, topic string, start []int64, win Window, ours func(uint32) bool, extra ...kgo.Opt) (*Consumer, error) {
	offs := make(map[int32]kgo.Offset, len(start))
	for p, o := range start {
		offs[int32(p)] = kgo.NewOffset().At(o)
	}
	opts := append(append(conn[:len(conn):len(conn)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
	), extra...)
	cl, err := newClient(roleConsumer, opts...)
	if err != nil {
		return nil, err
	}
	c := &Consumer{cl: cl, Win: win, Ours: ours, E2E: results.NewHistogram(), next: make([]atomic.Int64, len(start))}
	for p, o := range start {
		c.next[p].Store(o)
	}
	return c, nil
}

// run polls until ctx is done; pprof label role=consumer-client.
func (c *Consumer) Run(ctx context.Context) {
	pprof.Do(ctx, pprof.Labels("role", roleConsumer), func(ctx context.Context) {
		for ctx.Err() == nil {
			fs := c.cl.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				// Records come in offset order: one store per partition and fetch.
				if n := len(p.Records); n > 0 && int(p.Partition) < len(c.next) {
					c.next[p.Partition].Store(p.Records[n-1].Offset + 1)
				}
				for _, r := range p.Records {
					h, err := ParseHeader(r.Value)
					if err == nil && c.Peers != nil {
						c.Peers.see(h.ProducerID, now-h.Intended)
					}
					if err != nil || !c.Ours(h.ProducerID) || !c.Win.In(h.Intended) {
						continue
					}
					c.E2E.RecordNs(now - h.Intended)
				}
			})
		}
	})
}

// caughtUp reports whether the consumer received everything below end[p] for every partition
// (a group member: see groupCaughtUp).
func (c *Consumer) CaughtUp(end []int64) bool {
	for p, e := range end {
		if p < len(c.next) && c.next[p].Load() < e {
			return false
		}
	}
	return true
}

func (c *Consumer) Close() { c.cl.Close() }

// CheckDurability reads every partition back from start[p] (inclusive) to end[p] (exclusive,
// the HW after the run) and compares what it finds with what the producers had acknowledged.
// Records of other writers are ignored. A record seen twice counts as duplicated; a
// Producer's sequence going backwards within a partition counts as out of order.
//
// loadStart[p] is the partition's end offset before the load. Where start[p] > loadStart[p],
// retention deleted [loadStart[p], start[p]) before the read-back: an acknowledged record of
// Producer i that is missing there and whose sequence is below the first sequence of producer
// i read in its partition (records of one producer land in a partition in sequence order) was
// in the deleted range; it counts as expired, not lost. A missing record of a producer of
// which nothing is left in that partition counts as expired only if the highest offset that
// Producer had acknowledged there is below start[p] (with a sticky partitioner a producer can
// leave a partition early, and retention then deletes all of it); otherwise it is lost (the
// check never hides a loss it cannot place).
//
// It returns the totals and the counts by the producers' acks setting ("all", "1", "0").
func CheckDurability(ctx context.Context, conn []kgo.Opt, topic string, loadStart, start, end []int64, prods []*Producer) (results.DurabilityCounts, map[string]results.DurabilityCounts, error) {
	dcs := make([]results.DurabilityCounts, len(prods)) // per producer index
	byID := make(map[uint32]int, len(prods))
	seen := make([]bitset, len(prods))
	for i, p := range prods {
		byID[p.ID] = i
	}
	first := make(map[[2]int64]uint64) // (producer index, partition) -> first seq read (lowest offset)
	remaining := 0
	offs := map[int32]kgo.Offset{}
	for p := range start {
		if end[p] > start[p] {
			offs[int32(p)] = kgo.NewOffset().At(start[p])
			remaining++
		}
	}
	if remaining > 0 {
		cl, err := kgo.NewClient(append(conn[:len(conn):len(conn)],
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
			kgo.FetchMaxWait(200*time.Millisecond),
			// A transactional run's partitions end with a commit or abort marker: kept, so
			// that the read reaches the end offset (a marker is no producer's record).
			kgo.KeepControlRecords())...)
		if err != nil {
			countAcked(dcs, prods)
			tot, by, _ := sumCounts(dcs, prods)
			return tot, by, fmt.Errorf("reading back %s: %w", topic, err)
		}
		defer cl.Close()
		last := make(map[[2]int64]uint64) // (producer index, partition) -> last seq
		done := make([]bool, len(start))
		lastErr := map[int32]error{}
		read := make([]int64, len(start))
		copy(read, start)
		for remaining > 0 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				var left []string
				for p := range done {
					if !done[p] && end[p] > start[p] {
						left = append(left, fmt.Sprintf("%d at %d of [%d, %d) (last error: %v)", p, read[p], start[p], end[p], lastErr[int32(p)]))
					}
				}
				countAcked(dcs, prods)
				tot, by, _ := sumCounts(dcs, prods)
				return tot, by, fmt.Errorf("reading back %s: partitions not read to their HW: %s: %w", topic, strings.Join(left, "; "), ctx.Err())
			}
			fs.EachError(func(t string, p int32, err error) {
				// The client retries retriable errors; remember the last one for the report.
				lastErr[p] = err
			})
			fs.EachRecord(func(r *kgo.Record) {
				p := int(r.Partition)
				if p < len(read) {
					read[p] = r.Offset + 1
				}
				if p >= len(end) || done[p] || r.Offset >= end[p] {
					if p < len(end) && !done[p] && r.Offset+1 >= end[p] {
						done[p] = true
						remaining--
					}
					return
				}
				if r.Offset+1 >= end[p] {
					done[p] = true
					remaining--
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
					dcs[i].Duplicated++ // a second copy is a duplicate, not also out of order
					return
				}
				k := [2]int64{int64(i), int64(p)}
				if _, ok := first[k]; !ok {
					first[k] = h.Seq
				}
				if l, ok := last[k]; ok && h.Seq < l {
					dcs[i].OutOfOrder++ // first copy, but after a later record of its producer
					return
				}
				last[k] = h.Seq
			})
		}
	}
	// expired: seq of producer i (p.mu held) lies in its partition's range deleted by retention.
	expired := func(i int, p *Producer, seq uint64) bool {
		part := p.ackPart.get(seq)
		if int(part) >= len(start) || int(part) >= len(loadStart) || start[part] <= loadStart[part] {
			return false
		}
		if f, ok := first[[2]int64{int64(i), int64(part)}]; ok {
			return seq < f
		}
		// Nothing of producer i is left in the partition: expired only if every record it
		// had acknowledged there lay below the read-back's start.
		return int(part) < len(p.ackTop) && p.ackTop[part] > 0 && p.ackTop[part] <= start[part]
	}
	for i, p := range prods {
		p.mu.Lock()
		for wi, w := range p.acked.w {
			for ; w != 0; w &= w - 1 {
				seq := uint64(wi)*64 + uint64(bits.TrailingZeros64(w))
				dcs[i].Acked++
				switch {
				case seen[i].has(seq):
					dcs[i].Verified++
				case expired(i, p, seq):
					dcs[i].Expired++
				default:
					dcs[i].Lost++
				}
			}
		}
		p.mu.Unlock()
	}
	return sumCounts(dcs, prods)
}

// sumCounts adds per-producer counts into totals and by-acks counts (error always nil).
func sumCounts(dcs []results.DurabilityCounts, prods []*Producer) (results.DurabilityCounts, map[string]results.DurabilityCounts, error) {
	var tot results.DurabilityCounts
	by := map[string]results.DurabilityCounts{}
	for i, d := range dcs {
		tot = addCounts(tot, d)
		by[prods[i].spec.Acks] = addCounts(by[prods[i].spec.Acks], d)
	}
	return tot, by, nil
}

func addCounts(a, b results.DurabilityCounts) results.DurabilityCounts {
	a.Acked += b.Acked
	a.Verified += b.Verified
	a.Lost += b.Lost
	a.Duplicated += b.Duplicated
	a.OutOfOrder += b.OutOfOrder
	a.Expired += b.Expired
	return a
}

// countAcked fills only Acked (when the read-back could not finish).
func countAcked(dcs []results.DurabilityCounts, prods []*Producer) {
	for i, p := range prods {
		p.mu.Lock()
		dcs[i].Acked = p.acked.count()
		p.mu.Unlock()
	}
}
