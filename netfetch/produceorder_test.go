package netfetch_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

// TestProduceWakeAfterResponse: with isrbench.produce.wake.after.response=true an
// acks=0/1 produce is answered before its append wakes the fetches parked on the leader's LEO
// (the followers'), Kafka's order; with false they are woken first. A waiter registered on
// the leader's LEO signal, as a parked replica fetch is, records at each wake-up how many
// produces the leader had answered: the n-th append's wake-up must come after the n-th
// answer, or before it with the setting off. acks=all keeps its order (its answer waits for
// the HW, which needs the followers), the followers get every record and nothing more, and
// the replicas are identical.
func TestProduceWakeAfterResponse(t *testing.T) {
	for _, after := range []bool{true, false} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
				if after { // the default is false: only the lever is set
					cfg.WakeAfterResponse = true
				}
			})
			st, _ := clustertest.FollowedTopic(t, c, "wo")
			leader, ok := c.Broker(st.Leader).Replica("wo", 0)
			if !ok {
				t.Fatal("no leader replica")
			}
			var answered atomic.Int64
			netfetch.OnProduceAnswered(c.Server(st.Leader), func() { answered.Add(1) })
			var mu sync.Mutex
			var seen []int64 // answered produces at each wake-up of the LEO's waiters
			w := partition.NewWaiterFunc(func() {
				mu.Lock()
				seen = append(seen, answered.Load())
				mu.Unlock()
			})
			w.Reset(1)
			leader.WatchLEO(w, 0, leader.LEOSeq())
			t.Cleanup(w.Unwatch)

			rc := kafkatest.Dial(t, c.Addr(st.Leader))
			const n = 30
			for i := range n {
				switch i % 3 {
				case 0, 1: // acks=1
					resp := kafkatest.NewProduceResp()
					rc.RoundTrip(kafkatest.NewProduce("wo", 1, kafkatest.Batch(0)), resp)
					if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(i) {
						t.Fatalf("produce %d (acks=1): error %d base %d", i, p.ErrorCode, p.BaseOffset)
					}
				case 2: // acks=0: no response; the next request is read after it is handled
					rc.Send(kafkatest.NewProduce("wo", 0, kafkatest.Batch(0)))
					kafkatest.WaitFor(t, 10*time.Second, fmt.Sprintf("produce %d handled", i), func() bool {
						return answered.Load() == int64(i+1)
					})
				}
			}
			mu.Lock()
			got := append([]int64(nil), seen...)
			mu.Unlock()
			if len(got) != n {
				t.Fatalf("%d wake-ups of the LEO's waiters for %d appends: %v", len(got), n, got)
			}
			for k, a := range got {
				want := int64(k) // woken before its own answer
				if after {
					want = int64(k + 1)
				}
				if a != want {
					t.Fatalf("wake-up of append %d came after %d answered produces, want %d (after=%v): %v", k, a, want, after, got)
				}
			}

			// acks=all is answered only once the HW passed the batch, whatever the setting.
			resp := kafkatest.NewProduceResp()
			rc.RoundTrip(kafkatest.NewProduce("wo", -1, kafkatest.Batch(0)), resp)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != n {
				t.Fatalf("acks=all: error %d base %d, want base %d", p.ErrorCode, p.BaseOffset, n)
			}
			if hw := leader.HW(); hw <= p.BaseOffset {
				t.Fatalf("acks=all answered at HW %d, not past its offset %d", hw, p.BaseOffset)
			}
			clustertest.WaitReplicasHW(t, c, "wo", 0, n+1)
			for _, id := range st.Replicas {
				r, _ := c.Broker(id).Replica("wo", 0)
				if r.LEO() != n+1 {
					t.Errorf("broker %d LEO %d, the leader wrote %d records", id, r.LEO(), n+1)
				}
			}
			clustertest.CheckReplicasIdentical(t, c, "wo", 1)
		})
	}
}
