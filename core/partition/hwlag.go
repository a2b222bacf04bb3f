package partition

import "sync"

// lagRing remembers, per leader append, (last offset, append time, records)
// until the HW passes the batch, to report the HW lag (append -> HW passed)
// through Config.OnHWLag.
//
// It has its own small mutex. That is fine here: it is not on the ack path
// (the HW is published and waiters are signalled before the ring is
// drained), it is only used when OnHWLag is set, and it is held for a few
// slice operations plus the OnHWLag calls.
type lagRing struct {
	mu      sync.Mutex
	buf     []lagEntry // circular, len is a power of two
	head, n int
	dropped int64 // entries dropped because the ring was full
}

type lagEntry struct {
	lastOffset int64 // inclusive
	appendNs   int64
	records    int64
}

// maxLagEntries bounds the ring: while the HW does not move (ISR below
// min.insync.replicas) appends would otherwise grow it without limit; the
// oldest entries are dropped and counted.
const maxLagEntries = 1 << 16

func (r *lagRing) push(e lagEntry) {
	r.mu.Lock()
	if r.n == len(r.buf) {
		if len(r.buf) >= maxLagEntries {
			r.head = (r.head + 1) & (len(r.buf) - 1)
			r.n--
			r.dropped++
		} else {
			nb := make([]lagEntry, max(16, 2*len(r.buf)))
			for i := 0; i < r.n; i++ {
				nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
			}
			r.buf, r.head = nb, 0
		}
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
	r.mu.Unlock()
}

// drain reports and removes every entry whose last offset is below hw
// (exclusive), oldest first.
func (r *lagRing) drain(hw int64, nowNs int64, fn func(lagNs, records int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.n > 0 {
		e := r.buf[r.head]
		if e.lastOffset >= hw {
			return
		}
		r.head = (r.head + 1) & (len(r.buf) - 1)
		r.n--
		fn(nowNs-e.appendNs, e.records)
	}
}

// clear forgets every entry (leadership lost, log truncated).
func (r *lagRing) clear() {
	r.mu.Lock()
	r.head, r.n = 0, 0
	r.mu.Unlock()
}
