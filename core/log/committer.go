package log

import "sync"

// turn is a request's part of the group commit: embed it in a request type and construct
// the request with newTurn. Touched only by its caller and by the committer that runs it.
type turn struct {
	wake     chan struct{} // capacity 1: "your request was committed" or "take the committer role"
	finished bool          // set by the committer that committed the request
}

func newTurn() turn { return turn{wake: make(chan struct{}, 1)} }

func (t *turn) groupTurn() *turn { return t }

// committer is the group-commit role, the one batching rule of the log's write path: callers
// enqueue a request under a short mutex; the caller that finds no commit running becomes the
// committer, takes the whole queue, runs commit once for all of it, wakes the callers it
// committed for and hands the role to the first caller that queued meanwhile (or leaves it
// free). With one caller there is no goroutine hand-off; under load every request that
// arrives during a commit is committed by the next one.
//
// Two committers use it: each Log's, whose commit assigns offsets and writes the queued
// appends with one Writer.WriteAt (pwritev, pwrite or the io_uring writer), and the io_uring
// writer's, shared by every Log of the process, whose commit puts the queued writes and
// fsyncs of many Logs into shared io_uring submissions. A commit that keeps a device busy may
// finish requests before it returns (finish) and take in requests queued while it runs
// (pull), so the next requests go out while earlier ones are in flight.
//
// Concurrency: do may be called from any goroutine; commit runs in one goroutine at a time
// (in the calling goroutine of the current committer), and so do finish and pull. The free
// list recycles requests.
type committer[R interface {
	comparable
	groupTurn() *turn
}] struct {
	// commit commits group, set once before the first do. group[0] is the committer's own
	// request. commit may finish other members itself (finish, then it sets their entry to
	// the zero R); do finishes the rest when commit returns. Requests it pulls it must finish.
	commit func(group []R)
	mu     struct {
		sync.Mutex
		queue  []R
		free   []R
		active bool // a committer is running
	}
	group    []R    // the batch being committed (owned by the committer)
	onQueued func() // tests: called when a request queues behind a running committer
}

// get returns a recycled request, or ok false when there is none (the caller makes one with
// newTurn).
func (c *committer[R]) get() (r R, ok bool) {
	c.mu.Lock()
	if n := len(c.mu.free); n > 0 {
		r, ok = c.mu.free[n-1], true
		var zero R
		c.mu.free[n-1] = zero
		c.mu.free = c.mu.free[:n-1]
	}
	c.mu.Unlock()
	return r, ok
}

// put recycles r; its caller no longer uses it and no committer references it.
func (c *committer[R]) put(r R) {
	c.mu.Lock()
	c.mu.free = append(c.mu.free, r)
	c.mu.Unlock()
}

// finish tells g's caller that g was committed (commit only). g must not be the committer's
// own request, and the committer must not touch g afterwards: its caller may reuse it at once.
func (c *committer[R]) finish(g R) {
	t := g.groupTurn()
	t.finished = true
	t.wake <- struct{}{}
}

// pull appends to dst the requests queued since the commit began and takes them into the
// running commit, which must finish each (commit only).
func (c *committer[R]) pull(dst []R) []R {
	c.mu.Lock()
	dst = append(dst, c.mu.queue...)
	clear(c.mu.queue)
	c.mu.queue = c.mu.queue[:0]
	c.mu.Unlock()
	return dst
}

// do runs r through the group commit and returns once a commit that included r ended, in
// this goroutine or in another committer's.
func (c *committer[R]) do(r R) {
	t := r.groupTurn()
	t.finished = false
	c.mu.Lock()
	c.mu.queue = append(c.mu.queue, r)
	if c.mu.active {
		c.mu.Unlock()
		if c.onQueued != nil {
			c.onQueued()
		}
		<-t.wake
		if t.finished {
			return
		}
		c.mu.Lock() // promoted to committer
	}
	c.mu.active = true
	c.group = append(c.group[:0], c.mu.queue...)
	clear(c.mu.queue)
	c.mu.queue = c.mu.queue[:0]
	c.mu.Unlock()

	group := c.group
	c.commit(group)
	var zero R
	for _, g := range group {
		if g != r && g != zero {
			c.finish(g)
		}
	}
	clear(group)

	c.mu.Lock()
	if len(c.mu.queue) > 0 {
		next := c.mu.queue[0]
		c.mu.Unlock()
		next.groupTurn().wake <- struct{}{}
	} else {
		c.mu.active = false
		c.mu.Unlock()
	}
}
