package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnreachable is returned by LocalTransport connections when the source
// broker is missing, stopped, or the link is marked down.
var ErrUnreachable = errors.New("broker unreachable")

// LocalTransport is an in-process Transport: its FetchConn calls the source
// broker's Fetch / EndOffsetForEpoch directly and copies the records
// (Slice.ReadAll) into the response, so the whole replication protocol runs
// without sockets (tests, benchmarks). Safe for concurrent use.
type LocalTransport struct {
	resolve func(id int32) *Broker

	mu   sync.Mutex
	down map[[2]int32]bool // (from, to) links that fail
}

// NewLocalTransport returns a transport that finds source brokers with
// resolve (called on every request, so a restarted broker is picked up;
// nil = unreachable).
func NewLocalTransport(resolve func(id int32) *Broker) *LocalTransport {
	return &LocalTransport{resolve: resolve, down: make(map[[2]int32]bool)}
}

// SetLinkDown makes requests from broker `from` to broker `to` fail with
// ErrUnreachable (down = true) or work again.
func (t *LocalTransport) SetLinkDown(from, to int32, down bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if down {
		t.down[[2]int32{from, to}] = true
	} else {
		delete(t.down, [2]int32{from, to})
	}
}

func (t *LocalTransport) source(from, to int32) (*Broker, error) {
	t.mu.Lock()
	d := t.down[[2]int32{from, to}]
	t.mu.Unlock()
	if d {
		return nil, fmt.Errorf("local transport %d -> %d: link down: %w", from, to, ErrUnreachable)
	}
	b := t.resolve(to)
	if b == nil || !b.running() {
		return nil, fmt.Errorf("local transport %d -> %d: %w", from, to, ErrUnreachable)
	}
	return b, nil
}

// Dial implements Transport for an unnamed fetching broker (link faults
// set with SetLinkDown apply once its first ReplicaFetch names it); use
// From(id) to give each broker a transport that knows its id.
func (t *LocalTransport) Dial(ctx context.Context, source int32, fetcherIndex int) (FetchConn, error) {
	return t.dial(ctx, -1, source)
}

// From returns a Transport for broker id (link faults apply from the start).
func (t *LocalTransport) From(id int32) Transport { return localFrom{t, id} }

type localFrom struct {
	t  *LocalTransport
	id int32
}

func (f localFrom) Dial(ctx context.Context, source int32, fetcherIndex int) (FetchConn, error) {
	return f.t.dial(ctx, f.id, source)
}

func (t *LocalTransport) dial(ctx context.Context, from, source int32) (FetchConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := t.source(from, source); err != nil {
		return nil, err
	}
	return &localConn{t: t, src: source, from: from}, nil
}

type localConn struct {
	t    *LocalTransport
	src  int32
	from int32 // fetching broker id (learnt from the first ReplicaFetch)
	req  FetchRequest
	buf  []byte
	resp ReplicaFetchResponse
}

func (c *localConn) Fetch(ctx context.Context, rf *ReplicaFetch) (*ReplicaFetchResponse, error) {
	c.from = rf.ReplicaID
	b, err := c.t.source(c.from, c.src)
	if err != nil {
		return nil, err
	}
	c.req.ReplicaID = rf.ReplicaID
	c.req.MaxWait = time.Duration(rf.MaxWaitMs) * time.Millisecond
	c.req.MinBytes = rf.MinBytes
	c.req.MaxBytes = rf.MaxBytes
	c.req.IsolationLevel = 0
	c.req.Partitions = c.req.Partitions[:0]
	for _, p := range rf.Partitions {
		c.req.Partitions = append(c.req.Partitions, FetchPartition{
			Topic: p.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
			CurrentLeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset, MaxBytes: p.MaxBytes,
		})
	}
	b.Fetch(ctx, &c.req)
	// The buffer and response are reused: the Records are valid until the
	// next Fetch on this connection (the ReplicaFetchResponse contract).
	c.buf = c.buf[:0]
	if cap(c.resp.Partitions) < len(c.req.Partitions) {
		c.resp.Partitions = make([]ReplicaFetchResult, len(c.req.Partitions))
	}
	c.resp.Partitions = c.resp.Partitions[:len(c.req.Partitions)]
	resp := &c.resp
	var firstErr error
	for i := range c.req.Partitions {
		p := &c.req.Partitions[i]
		r := &resp.Partitions[i]
		*r = ReplicaFetchResult{Topic: p.Topic, Partition: p.Partition, Err: p.Err}
		r.HighWatermark, r.LogStartOffset = p.HighWatermark, p.LogStartOffsetOut
		if p.Records.Size > 0 && firstErr == nil {
			start := len(c.buf)
			c.buf, err = p.Records.ReadAll(c.buf)
			if err != nil {
				firstErr = err
			} else {
				r.Records = c.buf[start:len(c.buf):len(c.buf)]
			}
		}
		p.Records.Release()
		p.Records = emptySlice
	}
	if firstErr != nil {
		return nil, fmt.Errorf("local transport %d -> %d: read records: %w", c.from, c.src, firstErr)
	}
	if !b.running() {
		return nil, fmt.Errorf("local transport %d -> %d: %w", c.from, c.src, ErrUnreachable)
	}
	return resp, nil
}

func (c *localConn) OffsetForLeaderEpoch(ctx context.Context, q []EpochQuery) ([]EpochAnswer, error) {
	b, err := c.t.source(c.from, c.src)
	if err != nil {
		return nil, err
	}
	out := make([]EpochAnswer, len(q))
	for i, e := range q {
		ep, end, err := b.EndOffsetForEpoch(e.Topic, e.Partition, e.CurrentLeaderEpoch, e.LeaderEpoch)
		out[i] = EpochAnswer{Topic: e.Topic, Partition: e.Partition, Err: err, LeaderEpoch: ep, EndOffset: end}
	}
	return out, nil
}

func (c *localConn) Close() error { return nil }
