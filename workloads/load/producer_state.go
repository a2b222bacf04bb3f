package load

import "github.com/twmb/franz-go/pkg/kgo"

// The producers' whole-run state, read by the runner after (or, for the timeline, during) the
// load under each producer's lock.

// PartitionErrors sums the producers' failed records by partition and error name (whole run).
func PartitionErrors(prods []*Producer) map[int32]map[string]int64 {
	out := map[int32]map[string]int64{}
	for _, p := range prods {
		p.mu.Lock()
		for part, m := range p.partErrs {
			o := out[part]
			if o == nil {
				o = map[string]int64{}
				out[part] = o
			}
			for k, v := range m {
				o[k] += v
			}
		}
		p.mu.Unlock()
	}
	return out
}

// FailedBetween counts the producers' failed records whose intended send time (unix ns) lies
// in [lo, hi] (both inclusive).
func FailedBetween(prods []*Producer, lo, hi int64) int64 {
	var n int64
	for _, p := range prods {
		p.mu.Lock()
		for _, t := range p.failTimes {
			if t >= lo && t <= hi {
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// AckedCount is the number of p's records acknowledged so far (whole run).
func (p *Producer) AckedCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked.count()
}

// HasAcked reports whether p's record seq was acknowledged.
func (p *Producer) HasAcked(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked.has(seq)
}

// Close closes p's client; records still buffered are aborted.
func (p *Producer) Close() { p.client().Close() }

// client is p's current client (a restart-producer fault replaces it): the producer goroutine
// reads p.cl directly, the others through client.
func (p *Producer) client() *kgo.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cl
}

// Min is the least (receive - intended send) in ns of worker k's records (index K-1) that its
// Consumer read, math.MaxInt64 when none. Read it after the consumer stopped.
func (pc *PeerClock) Min(k int) int64 { return pc.min[k] }
