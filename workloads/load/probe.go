package load

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

const (
	roleProbe = "probe-client" // pprof role of the one-at-a-time probe's client

	// ProbeMaxWarmup bounds the probe's untimed records (one per partition).
	ProbeMaxWarmup = 100
)

// ProbeResult is what RunProbe measured. A plain value, RunProbe's once it returns.
type ProbeResult struct {
	Ack    *results.Histogram // send -> acknowledged, µs, of the timed records that succeeded
	Warmup int64              // untimed records sent first
	Sent   int64              // timed records sent (Ack.Count() plus the failed)
	Errors map[string]int64   // failed timed records by error name
	// Stopped is set when the budget ran out before every record was sent.
	Stopped bool
}

// RunProbe produces records one at a time to topic: each is sent when the previous one was
// acknowledged (kgo ProduceSync), with g's acks, message.size, idempotence and retries but
// linger 0. The first min(partitions, ProbeMaxWarmup) records, one to each of the partitions
// 0, 1, ..., open the connections, fetch the metadata and write each partition's first batch,
// and are not timed; the next n go round robin over the same partitions and are, each from
// just before its send to its acknowledgement. The values are zero bytes:
// no consumer of the harness takes them for its own records (load.ParseHeader refuses them).
// RunProbe stops when budget has passed (Stopped) and returns an error only when its client
// could not be created or ctx ended. Safe to call from any goroutine; each call has its own
// client.
func RunProbe(ctx context.Context, conn []kgo.Opt, g spec.ProducerSpec, topic string, partitions, n int, budget time.Duration) (*ProbeResult, error) {
	opts := append(conn[:len(conn):len(conn)], producerOpts(g, topic)...)
	opts = append(opts, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if l := clientLogger(); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	cl, err := newClient(roleProbe, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	res := &ProbeResult{Ack: results.NewHistogram(), Errors: map[string]int64{}}
	value := make([]byte, g.MessageSize)
	warm := min(partitions, ProbeMaxWarmup)
	for i := 0; i < warm+n; i++ {
		rec := &kgo.Record{Topic: topic, Value: value, Partition: int32(i % warm)}
		start := time.Now()
		err := cl.ProduceSync(pctx, rec).FirstErr()
		took := time.Since(start)
		if pctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Stopped = true // the record in flight at the deadline is neither timed nor failed
			break
		}
		if i < warm {
			res.Warmup++
			continue
		}
		res.Sent++
		if err != nil {
			res.Errors[errorName(err)]++
			continue
		}
		res.Ack.RecordNs(took.Nanoseconds())
	}
	return res, nil
}
