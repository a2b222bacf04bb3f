package netfetch

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// memoryPool is queued.max.request.bytes: the request buffers of one broker's connections
// (those larger than a connection's read buffer). It counts every buffer it made and has
// not dropped, held by a connection or kept free for reuse, and never lets the count pass
// its limit. Buffers come in power-of-two classes from 128 KiB to 32 MiB and are recycled,
// so that connections which come and go (a flood of half-sent requests timing out, say)
// reuse the same memory instead of leaving garbage for the collector, which with isrbench's
// GOGC of 400 could let the heap grow to several times the pool. A larger buffer has the
// exact size asked for and is dropped when released. Free buffers unused for freeIdle are
// dropped, and so are free buffers of another class when a request needs their room.
//
// Safe for concurrent use.
type memoryPool struct {
	limit int64 // math.MaxInt64 = unbounded
	waits atomic.Int64
	mu    struct {
		sync.Mutex
		used, peak int64 // bytes of buffers made and not dropped (held + free)
		held       int64 // of which connections hold
		free       [numClasses][]freeBuf
		freeBytes  int64
		freed      chan struct{} // closed (and replaced) when room may have appeared
		trim       *time.Timer   // armed while free buffers exist
		closed     bool
	}
}

type freeBuf struct {
	b  []byte
	at time.Time
}

const (
	minClassBytes = 128 << 10
	numClasses    = 9 // 128 KiB .. 32 MiB
	maxClassBytes = minClassBytes << (numClasses - 1)
	// freeIdle is how long a free buffer is kept for reuse.
	freeIdle = 10 * time.Second
)

func newMemoryPool(limit int64) *memoryPool {
	p := &memoryPool{limit: limit}
	if limit < 0 {
		p.limit = math.MaxInt64
	}
	return p
}

// classOf returns the class of a buffer capacity, or -1 if it is not a class size.
func classOf(c int) int {
	if c < minClassBytes || c > maxClassBytes || c&(c-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(c)) - bits.TrailingZeros(minClassBytes)
}

// capFor is the capacity of the buffer to make for want bytes of a request of n bytes:
// want rounded up to its class, or want itself above the largest class or when the class
// would not fit the pool.
func (p *memoryPool) capFor(want, n int) int {
	if want > maxClassBytes {
		return min(want, n)
	}
	c := max(minClassBytes, 1<<bits.Len(uint(want-1)))
	if int64(c) > p.limit {
		return min(want, n)
	}
	return c
}

// acquire returns a buffer of capacity at least c (len 0): a free one of its class or a
// larger one, or a new one of capacity c
// once there is room, dropping free buffers of other classes to make room, and waiting for
// releases until deadline (zero = none) or until stop is closed.
//
// old is the buffer the caller gives up for this one (a request buffer growing; nil if
// none). If the new buffer fits only without it, old is counted as dropped at once (the
// caller copies from it and leaves it to the collector) and oldDropped is true; otherwise
// the caller recycles old itself. So a request as large as the pool never waits for itself.
func (p *memoryPool) acquire(c int, old []byte, deadline time.Time, stop <-chan struct{}, onWait func()) (buf []byte, oldDropped bool, err error) {
	var timer *time.Timer
	k := classOf(c)
	for first := true; ; first = false {
		if !first && !deadline.IsZero() && !time.Now().Before(deadline) {
			// Woken as the deadline passed: a buffer taken now could not be read into.
			used, _, _ := p.usage()
			return nil, false, &errMemory{need: int64(c), used: used, limit: p.limit}
		}
		p.mu.Lock()
		// The smallest free buffer of the class or a larger one: reusing a larger buffer
		// costs pool room but makes no garbage (dropping it for a new one would).
		for j := k; k >= 0 && j < numClasses; j++ {
			if n := len(p.mu.free[j]); n > 0 {
				fb := p.mu.free[j][n-1]
				p.mu.free[j] = p.mu.free[j][:n-1]
				p.mu.freeBytes -= int64(cap(fb.b))
				p.mu.held += int64(cap(fb.b))
				p.mu.Unlock()
				return fb.b[:0], false, nil
			}
		}
		for int64(c) > p.limit-p.mu.used && p.mu.freeBytes > 0 {
			p.dropOneFreeLocked()
		}
		if int64(c) <= p.limit-p.mu.used {
			p.mu.used += int64(c)
			p.mu.held += int64(c)
			p.mu.peak = max(p.mu.peak, p.mu.used)
			p.mu.Unlock()
			return make([]byte, 0, c), false, nil
		}
		if o := int64(cap(old)); o > 0 && int64(c) <= p.limit-p.mu.used+o {
			p.mu.used += int64(c) - o
			p.mu.held += int64(c) - o
			p.mu.peak = max(p.mu.peak, p.mu.used)
			p.mu.Unlock()
			return make([]byte, 0, c), true, nil
		}
		if p.mu.freed == nil {
			p.mu.freed = make(chan struct{})
		}
		freed := p.mu.freed
		used := p.mu.used
		p.mu.Unlock()
		if first {
			p.waits.Add(1)
			if onWait != nil {
				onWait()
			}
			if !deadline.IsZero() {
				timer = time.NewTimer(time.Until(deadline))
				defer timer.Stop()
			}
		}
		var expired <-chan time.Time
		if timer != nil {
			expired = timer.C
		}
		select {
		case <-freed:
		case <-expired:
			return nil, false, &errMemory{need: int64(c), used: used, limit: p.limit}
		case <-stop:
			return nil, false, errStopped
		}
	}
}

// dropOneFreeLocked drops the largest free buffer (its memory goes to the collector).
func (p *memoryPool) dropOneFreeLocked() {
	for k := numClasses - 1; k >= 0; k-- {
		if n := len(p.mu.free[k]); n > 0 {
			fb := p.mu.free[k][0] // the oldest
			p.mu.free[k] = append(p.mu.free[k][:0], p.mu.free[k][1:]...)
			p.mu.freeBytes -= int64(cap(fb.b))
			p.mu.used -= int64(cap(fb.b))
			return
		}
	}
}

// recycle returns a buffer from acquire: kept for reuse if it has a class size (and the
// pool is open), else dropped; waiters are woken.
func (p *memoryPool) recycle(b []byte) {
	c := cap(b)
	if c == 0 {
		return
	}
	p.mu.Lock()
	p.mu.held -= int64(c)
	if p.mu.held < 0 {
		p.mu.Unlock()
		panic("BUG: netfetch: request memory pool recycled more than it handed out")
	}
	if k := classOf(c); k >= 0 && !p.mu.closed {
		p.mu.free[k] = append(p.mu.free[k], freeBuf{b: b[:0], at: time.Now()})
		p.mu.freeBytes += int64(c)
		if p.mu.trim == nil {
			p.mu.trim = time.AfterFunc(freeIdle, p.trimIdle)
		}
	} else {
		p.mu.used -= int64(c)
	}
	if p.mu.freed != nil {
		close(p.mu.freed)
		p.mu.freed = nil
	}
	p.mu.Unlock()
}

// trimIdle drops the free buffers unused for freeIdle and rearms while any are left.
func (p *memoryPool) trimIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.trim = nil
	cut := time.Now().Add(-freeIdle)
	var next time.Time
	for k := range p.mu.free {
		keep := p.mu.free[k][:0]
		for _, fb := range p.mu.free[k] {
			if fb.at.After(cut) && !p.mu.closed {
				keep = append(keep, fb)
				if next.IsZero() || fb.at.Before(next) {
					next = fb.at
				}
				continue
			}
			p.mu.freeBytes -= int64(cap(fb.b))
			p.mu.used -= int64(cap(fb.b))
		}
		clear(p.mu.free[k][len(keep):])
		p.mu.free[k] = keep
	}
	if !next.IsZero() {
		p.mu.trim = time.AfterFunc(time.Until(next.Add(freeIdle)), p.trimIdle)
	}
}

// close drops the free buffers; buffers recycled later are dropped too.
func (p *memoryPool) close() {
	p.mu.Lock()
	p.mu.closed = true
	if p.mu.trim != nil {
		p.mu.trim.Stop()
	}
	p.mu.Unlock()
	p.trimIdle()
}

// usage returns the bytes of buffers made and not dropped (the figure bounded by the
// limit), the most ever at once, and the part of the first held by connections.
func (p *memoryPool) usage() (used, peak, held int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.used, p.mu.peak, p.mu.held
}
