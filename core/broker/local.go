package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnreachable is returned by LocalTransport connections when the source
// broker is missing or stopped.
var ErrUnreachable = errors.New("broker unreachable")

// LocalTransport is an in-process Transport: its FetchConn calls the source
// broker's Fetch / EndOffsetForEpoch / ListOffsetFor directly and copies the records
// (Slice.ReadAll) into the response, so the whole replication protocol runs
// without sockets (tests, benchmarks). Safe for concurrent use.
type LocalTransport struct {
	resolve func(id int32) *Broker
}

// NewLocalTransport returns a transport that finds source brokers with
// resolve (called on every request, so a restarted broker is picked up;
// nil = unreachable).
func NewLocalTransport(resolve func(id int32) *Broker) *LocalTransport {
	return &LocalTransport{resolve: resolve}
}

func (t *LocalTransport) source(to int32) (*Broker, error) {
	b := t.resolve(to)
	if b == nil || !b.running() {
		return nil, fmt.Errorf("local transport to broker %d: %w", to, ErrUnreachable)
	}
	return b, nil
}

// Dial implements Transport.
func (t *LocalTransport) Dial(ctx context.Context, source int32, fetcherIndex int) (FetchConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := t.source(source); err != nil {
		return nil, err
	}
	return &localConn{t: t, src: source}, nil
}

type localConn struct {
	t   *LocalTransport
	src int32
	rc  ReplicaServe
}

func (c *localConn) Fetch(ctx context.Context, rf *ReplicaFetch) (*ReplicaFetchResponse, error) {
	b, err := c.t.source(c.src)
	if err != nil {
		return nil, err
	}
	resp, err := c.rc.Fetch(ctx, b, rf)
	if err != nil {
		return nil, fmt.Errorf("local transport %d -> %d: %w", rf.ReplicaID, c.src, err)
	}
	if !b.running() {
		return nil, fmt.Errorf("local transport %d -> %d: %w", rf.ReplicaID, c.src, ErrUnreachable)
	}
	return resp, nil
}

func (c *localConn) OffsetForLeaderEpoch(ctx context.Context, q []EpochQuery) ([]EpochAnswer, error) {
	b, err := c.t.source(c.src)
	if err != nil {
		return nil, err
	}
	return ServeEpochs(b, q), nil
}

func (c *localConn) ListOffsets(ctx context.Context, replicaID int32, q []OffsetQuery) ([]OffsetAnswer, error) {
	b, err := c.t.source(c.src)
	if err != nil {
		return nil, err
	}
	return ServeOffsets(b, replicaID, q), nil
}

func (c *localConn) Close() error { return nil }

// ReplicaServe serves replica fetches on a leader in-process: it turns a ReplicaFetch into
// the leader's Fetch and copies the records into a reused buffer. LocalTransport uses one
// per connection; the simulator uses it to answer fetches it delivers. Not safe for
// concurrent use; a response is valid until the next Fetch on the same ReplicaServe.
type ReplicaServe struct {
	req  FetchRequest
	buf  []byte
	resp ReplicaFetchResponse
}

// Fetch runs rf on leader b (MaxWaitMs applies: it may park as a long poll) and returns its
// response.
func (s *ReplicaServe) Fetch(ctx context.Context, b *Broker, rf *ReplicaFetch) (*ReplicaFetchResponse, error) {
	s.req.ReplicaID = rf.ReplicaID
	s.req.ReplicaEpoch = rf.ReplicaEpoch
	s.req.MaxWait = time.Duration(rf.MaxWaitMs) * time.Millisecond
	s.req.MinBytes = rf.MinBytes
	s.req.MaxBytes = rf.MaxBytes
	s.req.IsolationLevel = 0
	s.req.Partitions = s.req.Partitions[:0]
	for _, p := range rf.Partitions {
		s.req.Partitions = append(s.req.Partitions, FetchPartition{
			Topic: p.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
			CurrentLeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset, MaxBytes: p.MaxBytes,
		})
	}
	b.Fetch(ctx, &s.req)
	s.buf = s.buf[:0]
	if cap(s.resp.Partitions) < len(s.req.Partitions) {
		s.resp.Partitions = make([]ReplicaFetchResult, len(s.req.Partitions))
	}
	s.resp.Partitions = s.resp.Partitions[:len(s.req.Partitions)]
	var firstErr error
	for i := range s.req.Partitions {
		p := &s.req.Partitions[i]
		r := &s.resp.Partitions[i]
		*r = ReplicaFetchResult{Topic: p.Topic, Partition: p.Partition, Err: p.Err}
		r.HighWatermark, r.LogStartOffset = p.HighWatermark, p.LogStartOffsetOut
		if p.Records.Size > 0 && firstErr == nil {
			start := len(s.buf)
			var err error
			s.buf, err = p.Records.ReadAll(s.buf)
			if err != nil {
				firstErr = err
			} else {
				r.Records = s.buf[start:len(s.buf):len(s.buf)]
			}
		}
		p.Records.Release()
		p.Records = emptySlice
	}
	if firstErr != nil {
		return nil, fmt.Errorf("read records: %w", firstErr)
	}
	return &s.resp, nil
}

// ServeEpochs answers OffsetForLeaderEpoch questions on leader b.
func ServeEpochs(b *Broker, q []EpochQuery) []EpochAnswer {
	out := make([]EpochAnswer, len(q))
	for i, e := range q {
		ep, end, err := b.EndOffsetForEpoch(e.Topic, e.Partition, e.CurrentLeaderEpoch, e.LeaderEpoch)
		out[i] = EpochAnswer{Topic: e.Topic, Partition: e.Partition, Err: err, LeaderEpoch: ep, EndOffset: end}
	}
	return out
}

// ServeOffsets answers a replica's ListOffsets questions on leader b.
func ServeOffsets(b *Broker, replicaID int32, q []OffsetQuery) []OffsetAnswer {
	out := make([]OffsetAnswer, len(q))
	for i, e := range q {
		off, err := b.ListOffsetFor(replicaID, e.CurrentLeaderEpoch, e.Topic, e.Partition, e.Timestamp, 0)
		out[i] = OffsetAnswer{Topic: e.Topic, Partition: e.Partition, Timestamp: e.Timestamp, Err: err, Offset: off}
	}
	return out
}
