package broker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/controller"
)

// fetchBenchCounts are the partition counts of the fetch benchmarks, up to
// $ISRBENCH_FETCHBENCH_MAX (default 1000: creating 10,000 partitions takes minutes on a loaded
// host, for each of a benchmark's rounds): the cost of a parked fetch's wake-up should not
// grow with them.
func fetchBenchCounts() []int32 {
	limit := 1000
	if v, err := strconv.Atoi(os.Getenv("ISRBENCH_FETCHBENCH_MAX")); err == nil {
		limit = v
	}
	var out []int32
	for _, n := range []int32{10, 100, 1000, 10000} {
		if int(n) <= limit {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkFetchParkedWake: one consumer fetch parked over every partition of an RF 1 topic
// (min.bytes out of reach, max.wait long) while b.N one-record batches are produced, one
// partition after another; each append wakes the parked fetch, which re-checks and parks
// again before the next append. ns/op is one produce plus its wake-up and re-park: flat
// across partition counts when a wake re-checks only the partition that changed.
func BenchmarkFetchParkedWake(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			_, l := fetchBenchCluster(b, n)
			blob := batch("w", 1)
			tmpl := append([]byte(nil), blob...)
			req := fetchBenchRequest(n, 0)
			req.MinBytes = int32(min(int64(b.N+1)*int64(len(tmpl)), 1<<30))
			req.MaxWait = time.Minute
			pp := []ProducePartition{{Topic: "t"}}
			ctx := context.Background()
			done := make(chan struct{})
			parked := make(chan struct{}, 1)
			l.parkedHook = func() {
				select {
				case parked <- struct{}{}:
				default: // a spurious extra wake-up: never block the fetch
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				defer close(done)
				l.Fetch(ctx, req)
			}()
			for i := 0; i < b.N; i++ {
				copy(blob, tmpl)
				pp[0].Partition, pp[0].Records = int32(i)%n, blob
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
				<-parked // woken, re-checked, parked again
			}
			// One more, past min.bytes, completes the fetch.
			copy(blob, tmpl)
			pp[0].Partition, pp[0].Records = 0, blob
			l.Produce(ctx, 1, time.Second, pp)
			<-done
			b.StopTimer()
			releaseFetch(req)
		})
	}
}

// BenchmarkSessionFetchParkedWake is BenchmarkFetchParkedWake on a fetch session over every
// partition (the wire server's incremental fetches, and every replica fetcher's): each
// partition holds a record first; ns/op is one produce plus the session's wake-up and
// re-park. Past log.ActiveFileCacheSize partitions the round robin reopens the file of every
// partition it appends to (the cache keeps the most recently used), and it touches a new
// partition's memory each time: both grow ns/op with the partition count, the wake-up does
// not (BenchmarkSessionFetchWake isolates it).
func BenchmarkSessionFetchParkedWake(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			_, l := fetchBenchCluster(b, n)
			blob := batch("w", 1)
			tmpl := append([]byte(nil), blob...)
			pp := []ProducePartition{{Topic: "t"}}
			ctx := context.Background()
			s := l.NewFetchSession(false)
			defer s.Close()
			for p := int32(0); p < n; p++ {
				copy(blob, tmpl)
				pp[0].Partition, pp[0].Records = p, blob
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
				s.Set(&FetchPartition{Topic: "t", Partition: p, FetchOffset: 1, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}, false)
			}
			req := &FetchRequest{ReplicaID: -1, MaxBytes: 64 << 20}
			l.SessionFetch(ctx, s, req) // visits every partition once: all quiet afterwards
			req.MinBytes = int32(min(int64(b.N+1)*int64(len(tmpl)), 1<<30))
			req.MaxWait = time.Minute
			done := make(chan struct{})
			parked := make(chan struct{}, 1)
			l.parkedHook = func() {
				select {
				case parked <- struct{}{}:
				default:
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				defer close(done)
				l.SessionFetch(ctx, s, req)
			}()
			<-parked
			for i := 0; i < b.N; i++ {
				copy(blob, tmpl)
				pp[0].Partition, pp[0].Records = int32(i)%n, blob
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
				<-parked // woken, re-checked, parked again
			}
			copy(blob, tmpl)
			pp[0].Partition, pp[0].Records = 0, blob
			l.Produce(ctx, 1, time.Second, pp)
			<-done
			b.StopTimer()
			releaseFetch(req)
		})
	}
}

// BenchmarkProduceRoundRobin is BenchmarkFetchParkedWake's produce loop with no fetch parked:
// the difference of the two is the wake-up's cost.
func BenchmarkProduceRoundRobin(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			_, l := fetchBenchCluster(b, n)
			blob := batch("w", 1)
			tmpl := append([]byte(nil), blob...)
			pp := []ProducePartition{{Topic: "t"}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(blob, tmpl)
				pp[0].Partition, pp[0].Records = int32(i)%n, blob
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
			}
		})
	}
}

// BenchmarkProduceRoundRobinWarm is BenchmarkSessionFetchParkedWake's produce loop (every
// partition written once first) with no fetch parked: the difference of the two is the
// session's wake-up.
func BenchmarkProduceRoundRobinWarm(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			_, l := fetchBenchCluster(b, n)
			blob := batch("w", 1)
			tmpl := append([]byte(nil), blob...)
			pp := []ProducePartition{{Topic: "t"}}
			ctx := context.Background()
			for i := 0; i < int(n)+b.N; i++ {
				if i == int(n) {
					b.ReportAllocs()
					b.ResetTimer()
				}
				copy(blob, tmpl)
				pp[0].Partition, pp[0].Records = int32(i)%n, blob
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
			}
		})
	}
}

// BenchmarkFetchServe serves a consumer fetch over every partition of an RF 1 topic, each
// with one batch to return (no parking): the cost of a response grows with its partitions.
func BenchmarkFetchServe(b *testing.B) {
	for _, n := range fetchBenchCounts() {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			_, l := fetchBenchCluster(b, n)
			ctx := context.Background()
			blob := batch("s", 1)
			pp := []ProducePartition{{Topic: "t"}}
			for p := int32(0); p < n; p++ {
				pp[0].Partition, pp[0].Records = p, append([]byte(nil), blob...)
				l.Produce(ctx, 1, time.Second, pp)
				if pp[0].Err != nil {
					b.Fatal(pp[0].Err)
				}
			}
			req := fetchBenchRequest(n, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Fetch(ctx, req)
				releaseFetch(req)
			}
		})
	}
}

// fetchBenchCluster starts one broker leading every partition of topic "t" (RF 1).
func fetchBenchCluster(b *testing.B, n int32) (*testCluster, *Broker) {
	c := newTestCluster(b, 1, testConfig())
	c.createTopicWithin("t", n, 1, nil, 10*time.Minute)
	l := c.leader("t", n-1) // waits for the last partition to be led
	return c, l
}

func fetchBenchRequest(n int32, maxWaitMs int) *FetchRequest {
	req := &FetchRequest{ReplicaID: -1, MaxBytes: 64 << 20, MaxWait: time.Duration(maxWaitMs) * time.Millisecond}
	req.Partitions = make([]FetchPartition, n)
	for i := range req.Partitions {
		req.Partitions[i] = FetchPartition{Topic: "t", Partition: int32(i), CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}
	}
	return req
}

func releaseFetch(req *FetchRequest) {
	for i := range req.Partitions {
		if err := req.Partitions[i].Err; err != nil {
			panic(fmt.Sprintf("fetch %d: %v", i, err))
		}
		req.Partitions[i].Records.Release()
		req.Partitions[i].Records = emptySlice
	}
}

// BenchmarkSessionFetchWake isolates a parked fetch session's wake-up from the produce that
// causes it. One broker leads every partition of a topic, each holding a record; a fetch
// session covers all of them, each visited once (quiet afterwards): a consumer's (RF 1,
// kind=consumer: parks on the HW) or a follower's (RF 2 led by broker 0, kind=replica: parks
// on the LEO; broker 1's own fetcher is stopped and the benchmark fetches as broker 1). Each
// iteration of the "wake" kind sends the session's next fetch (naming partition 0 at its new
// offset, as an incremental request does), waits until it parks (min.bytes 1, max.wait one
// minute), produces one record to partition 0 (acks=1; a warm partition: its file stays
// open) and waits for the fetch to return that record. Iterations of the "produce" kind
// produce the same record with no fetch parked. The two kinds alternate in blocks of 50 in
// one run, so a host whose speed varies affects both alike; the run reports produce-ns/op
// (the produce alone) and wake-ns/op (the rest of a wake iteration: waking the session,
// reading and returning the record, parking the next fetch). Both should be flat across
// partition counts.
func BenchmarkSessionFetchWake(b *testing.B) {
	type setup struct{ l, f *Broker }
	clusters := map[string]setup{} // created once per kind and size for every round (b owns them)
	for _, kind := range []string{"consumer", "replica"} {
		for _, n := range fetchBenchCounts() {
			name := fmt.Sprintf("kind=%s/partitions=%d", kind, n)
			b.Run(name, func(sb *testing.B) {
				st, ok := clusters[name]
				if !ok {
					if kind == "consumer" {
						_, st.l = fetchBenchCluster(b, n)
					} else {
						st.l, st.f = replicaBenchCluster(b, n)
					}
					clusters[name] = st
					blob := batch("w", 1)
					pp := []ProducePartition{{Topic: "t"}}
					for p := int32(0); p < n; p++ {
						pp[0].Partition, pp[0].Records = p, append([]byte(nil), blob...)
						st.l.Produce(context.Background(), 1, time.Second, pp)
						if pp[0].Err != nil {
							sb.Fatal(pp[0].Err)
						}
					}
				}
				benchSessionWake(sb, st.l, st.f, n)
			})
		}
	}
}

// replicaBenchCluster starts brokers 0 and 1, creates topic "t" with n partitions led by
// broker 0 and followed by broker 1, then stops broker 1's fetchers: the benchmark fetches
// as broker 1.
func replicaBenchCluster(b *testing.B, n int32) (leader, follower *Broker) {
	c := newTestCluster(b, 2, testConfig())
	as := make([]controller.ReplicaAssignment, n)
	for p := range as {
		as[p] = controller.ReplicaAssignment{Partition: int32(p), Replicas: []int32{0, 1}}
	}
	if _, err := c.ctrl.CreateTopicAssigned("t", as, nil, false); err != nil {
		b.Fatal(err)
	}
	c.waitFor("topic t led by broker 0 and followed by broker 1", 10*time.Minute, func() bool {
		for _, id := range []int32{0, 1} {
			r, ok := c.broker(id).Replica("t", n-1)
			if !ok || r.IsLeader() != (id == 0) || r.LeaderEpoch() < 0 {
				return false
			}
		}
		return true
	})
	leader, follower = c.broker(0), c.broker(1)
	follower.apply.Lock()
	for p := int32(0); p < n; p++ {
		follower.removeFromFetchers(tp{"t", p})
	}
	follower.apply.Unlock()
	return leader, follower
}

// benchSessionWake runs BenchmarkSessionFetchWake on leader l: a consumer session, or
// follower's replica session when follower is not nil.
func benchSessionWake(b *testing.B, l, follower *Broker, n int32) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := l.NewFetchSession(follower != nil)
	defer s.Close()
	r, _ := l.Replica("t", 0)
	for p := int32(0); p < n; p++ {
		off := int64(1)
		if p == 0 {
			off = r.LEO()
		}
		s.Set(&FetchPartition{Topic: "t", Partition: p, FetchOffset: off, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}, false)
	}
	req := &FetchRequest{ReplicaID: -1, MaxBytes: 64 << 20}
	if follower != nil {
		req.ReplicaID, req.ReplicaEpoch = follower.ID(), follower.Epoch()
	}
	l.SessionFetch(ctx, s, req) // visits every partition once: all quiet afterwards
	releaseFetch(req)
	if follower != nil { // the HW moved: once more, so that nothing is left to report
		l.SessionFetch(ctx, s, req)
		releaseFetch(req)
	}

	parked := make(chan struct{}, 1)
	l.parkedHook = func() {
		select {
		case parked <- struct{}{}:
		default:
		}
	}
	defer func() { l.parkedHook = nil }()
	next, fetched := make(chan int64), make(chan error)
	go func() { // the client: one fetch per offset sent
		for off := range next {
			s.Set(&FetchPartition{Topic: "t", Partition: 0, FetchOffset: off, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}, false)
			req.MinBytes, req.MaxWait = 1, time.Minute
			l.SessionFetch(ctx, s, req)
			var err error
			if len(req.Partitions) != 1 || req.Partitions[0].Partition != 0 || req.Partitions[0].Records.Size == 0 {
				err = fmt.Errorf("fetch at offset %d returned %d partitions, want partition 0 with its new record", off, len(req.Partitions))
			}
			for i := range req.Partitions {
				if e := req.Partitions[i].Err; e != nil && err == nil {
					err = e
				}
				req.Partitions[i].Records.Release()
				req.Partitions[i].Records = emptySlice
			}
			fetched <- err
		}
	}()
	defer close(next)

	blob := batch("w", 1)
	tmpl := append([]byte(nil), blob...)
	pp := []ProducePartition{{Topic: "t"}}
	produce := func() {
		copy(blob, tmpl)
		pp[0].Partition, pp[0].Records = 0, blob
		l.Produce(ctx, 1, time.Second, pp)
		if pp[0].Err != nil {
			b.Fatal(pp[0].Err)
		}
	}
	const block = 50
	var produceNs, wakeNs time.Duration
	var produces, wakes int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		k := min(block, b.N-i)
		t0 := time.Now()
		if (i/block)%2 == 0 {
			for j := 0; j < k; j++ {
				produce()
			}
			produceNs += time.Since(t0)
			produces += k
		} else {
			for j := 0; j < k; j++ {
				next <- r.LEO()
				<-parked
				produce()
				if err := <-fetched; err != nil {
					b.Fatal(err)
				}
			}
			wakeNs += time.Since(t0)
			wakes += k
		}
		i += k
	}
	b.StopTimer()
	if produces > 0 {
		perProduce := float64(produceNs.Nanoseconds()) / float64(produces)
		b.ReportMetric(perProduce, "produce-ns/op")
		if wakes > 0 {
			b.ReportMetric(float64(wakeNs.Nanoseconds())/float64(wakes)-perProduce, "wake-ns/op")
		}
	}
}
