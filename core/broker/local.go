package broker

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnreachable is returned by LocalTransport connections when the source
// broker is missing or stopped.
var ErrUnreachable = errors.New("broker unreachable")

// LocalTransport is an in-process Transport: its FetchConn hands the fetcher's
// FetchRequest to the source broker's Fetch (and calls EndOffsetForEpoch /
// ListOffsetFor) directly and copies the records (Slice.ReadAll) into RecordBytes,
// so the whole replication protocol runs without sockets (tests, benchmarks).
// Safe for concurrent use.
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

func (c *localConn) Fetch(ctx context.Context, req *FetchRequest) ([]FetchPartition, error) {
	b, err := c.t.source(c.src)
	if err != nil {
		return nil, err
	}
	resp, err := c.rc.Fetch(ctx, b, req)
	if err != nil {
		return nil, fmt.Errorf("local transport %d -> %d: %w", req.ReplicaID, c.src, err)
	}
	if !b.running() {
		return nil, fmt.Errorf("local transport %d -> %d: %w", req.ReplicaID, c.src, ErrUnreachable)
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

// ReplicaServe serves replica fetches on a leader in process, the in-process half of what a
// FetchConn does: it runs the follower's FetchRequest through the leader's Fetch (in place)
// and copies each partition's records into a reused buffer (RecordBytes), releasing the
// leader's file slices. LocalTransport uses one per connection; the simulator uses it to
// answer fetches it delivers. Not safe for concurrent use; RecordBytes are valid until the
// next Fetch on the same ReplicaServe.
type ReplicaServe struct {
	buf []byte
}

// Fetch runs req on leader b (MaxWait applies: it may park as a long poll) and returns req's
// partitions with their outputs and RecordBytes set.
func (s *ReplicaServe) Fetch(ctx context.Context, b *Broker, req *FetchRequest) ([]FetchPartition, error) {
	b.Fetch(ctx, req)
	s.buf = s.buf[:0]
	var firstErr error
	for i := range req.Partitions {
		p := &req.Partitions[i]
		p.RecordBytes = nil
		if p.Records.Size > 0 && firstErr == nil {
			start := len(s.buf)
			var err error
			s.buf, err = p.Records.ReadAll(s.buf)
			if err != nil {
				firstErr = err
			} else {
				p.RecordBytes = s.buf[start:len(s.buf):len(s.buf)]
			}
		}
		p.Records.Release()
		p.Records = emptySlice
	}
	if firstErr != nil {
		return nil, fmt.Errorf("read records: %w", firstErr)
	}
	return req.Partitions, nil
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
		off, _, err := b.ListOffsetFor(replicaID, e.CurrentLeaderEpoch, e.Topic, e.Partition, e.Timestamp, 0)
		out[i] = OffsetAnswer{Topic: e.Topic, Partition: e.Partition, Timestamp: e.Timestamp, Err: err, Offset: off}
	}
	return out
}
