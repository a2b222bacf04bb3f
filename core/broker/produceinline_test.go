package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// produceAnswered produces blob with acks through ProduceStart and Wait and returns the
// outputs, whether the answer function ran and how often it ran.
func produceAnswered(t testing.TB, b *Broker, a *AckWaiter, acks int16, topic string, p int32, blob []byte, timeout time.Duration) (ProducePartition, bool, int) {
	t.Helper()
	parts := []ProducePartition{{Topic: topic, Partition: p, Records: blob}}
	var calls atomic.Int32
	var seen ProducePartition
	wait, _ := b.ProduceStart(context.Background(), acks, parts, a, func() {
		calls.Add(1)
		seen = parts[0] // the outputs must be final when the answer runs
	})
	if !wait {
		return parts[0], false, int(calls.Load())
	}
	answered, _ := a.Wait(context.Background(), timeout)
	if answered && (seen.Err != parts[0].Err || seen.BaseOffset != parts[0].BaseOffset) {
		t.Fatalf("the answer saw %+v, the outputs are %+v", seen, parts[0])
	}
	return parts[0], answered, int(calls.Load())
}

// TestAckWaiterAnswers: acks=all produces through an AckWaiter are answered once each, with the
// base offsets Produce gives; acks=1 does not wait and is not answered through it.
func TestAckWaiterAnswers(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	a := NewAckWaiter()
	for i := range 20 {
		res, answered, calls := produceAnswered(t, l, a, -1, "t", 0, batch(fmt.Sprint("a", i), 2), 5*time.Second)
		if res.Err != nil || !answered || calls != 1 || res.BaseOffset != int64(2*i) {
			t.Fatalf("produce %d: %+v answered %v, answer called %d times; want offset %d, answered once", i, res, answered, calls, 2*i)
		}
	}
	res, answered, calls := produceAnswered(t, l, a, 1, "t", 0, batch("b", 1), 5*time.Second)
	if res.Err != nil || answered || calls != 0 || res.BaseOffset != 40 {
		t.Fatalf("acks=1: %+v answered %v calls %d", res, answered, calls)
	}
	c.waitFor("HW 41", 5*time.Second, func() bool { return l.lookup("t", 0).r.HW() == 41 })
	c.assertReplicasIdentical("t", 0)
}

// TestAckWaiterTimesOut: with the followers paused the wait expires with REQUEST_TIMED_OUT and
// the answer never runs, not even when the HW passes the batch later; the waiter is reusable.
func TestAckWaiterTimesOut(t *testing.T) {
	cfg := testConfig()
	cfg.ReplicaLagTimeMaxMs = 60000 // stays in the ISR: the produce must time out
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	for _, id := range c.ids() {
		if id != l.ID() {
			c.broker(id).Pause()
		}
	}
	a := NewAckWaiter()
	parts := []ProducePartition{{Topic: "t", Partition: 0, Records: batch("a", 1)}}
	var late atomic.Int32
	if wait, _ := l.ProduceStart(context.Background(), -1, parts, a, func() { late.Add(1) }); !wait {
		t.Fatal("acks=all with paused followers does not wait")
	}
	if answered, _ := a.Wait(context.Background(), 100*time.Millisecond); answered {
		t.Fatal("answered with the followers paused")
	}
	if !errors.Is(parts[0].Err, kerr.RequestTimedOut) || parts[0].BaseOffset != 0 {
		t.Fatalf("after the timeout: %+v, want REQUEST_TIMED_OUT at base offset 0", parts[0])
	}
	for _, id := range c.ids() {
		if id != l.ID() {
			c.broker(id).Resume()
		}
	}
	c.waitFor("HW 1", 5*time.Second, func() bool { return l.lookup("t", 0).r.HW() == 1 })
	res, answered, calls := produceAnswered(t, l, a, -1, "t", 0, batch("b", 1), 5*time.Second)
	if res.Err != nil || !answered || calls != 1 || res.BaseOffset != 1 {
		t.Fatalf("after resume: %+v answered %v calls %d", res, answered, calls)
	}
	if n := late.Load(); n != 0 {
		t.Fatalf("the expired produce was answered %d times", n)
	}
}

// TestAckWaiterCanceled: a canceled context ends the wait like a timeout.
func TestAckWaiterCanceled(t *testing.T) {
	cfg := testConfig()
	cfg.ReplicaLagTimeMaxMs = 60000
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	for _, id := range c.ids() {
		if id != l.ID() {
			c.broker(id).Pause()
		}
	}
	a := NewAckWaiter()
	ctx, cancel := context.WithCancel(context.Background())
	parts := []ProducePartition{{Topic: "t", Partition: 0, Records: batch("a", 1)}}
	if wait, _ := l.ProduceStart(ctx, -1, parts, a, func() { t.Error("answered") }); !wait {
		t.Fatal("no wait")
	}
	cancel()
	if answered, _ := a.Wait(ctx, time.Minute); answered || !errors.Is(parts[0].Err, kerr.RequestTimedOut) {
		t.Fatalf("canceled: answered %v, %+v", answered, parts[0])
	}
}

// TestAckWaiterRace: producers on several partitions race their timeouts against the HW
// advances; every produce ends exactly one way: answered once with its outputs final, or
// expired with no answer and REQUEST_TIMED_OUT on a partition that was still waiting.
func TestAckWaiterRace(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 4, 3, map[string]string{"min.insync.replicas": "2"})
	var wg sync.WaitGroup
	var answeredN, expiredN atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := NewAckWaiter()
			for i := range 50 {
				parts := []ProducePartition{
					{Topic: "t", Partition: int32(w), Records: batch("x", 1)},
					{Topic: "t", Partition: int32((w + 1) % 4), Records: batch("y", 1)},
				}
				l0, l1 := c.leader("t", parts[0].Partition), c.leader("t", parts[1].Partition)
				if l0 != l1 {
					parts = parts[:1]
				}
				var calls atomic.Int32
				wait, _ := l0.ProduceStart(context.Background(), -1, parts, a, func() { calls.Add(1) })
				if !wait {
					t.Errorf("produce %d/%d did not wait: %+v", w, i, parts)
					return
				}
				timeout := time.Duration(i%5) * 200 * time.Microsecond // 0 expires at once
				answered, _ := a.Wait(context.Background(), timeout)
				switch n := calls.Load(); {
				case answered && n == 1:
					answeredN.Add(1)
					for _, p := range parts {
						if p.Err != nil {
							t.Errorf("answered with %v", p.Err)
						}
					}
				case !answered && n == 0:
					expiredN.Add(1)
					timedOut := false
					for _, p := range parts {
						timedOut = timedOut || errors.Is(p.Err, kerr.RequestTimedOut)
					}
					if !timedOut {
						t.Errorf("expired without REQUEST_TIMED_OUT: %+v", parts)
					}
				default:
					t.Errorf("answered %v with %d answer calls", answered, n)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d answered, %d expired", answeredN.Load(), expiredN.Load())
	if answeredN.Load() == 0 {
		t.Error("nothing answered")
	}
}

// TestProduceStartDoesNotAllocate: an acks=all produce through ProduceStart and Wait allocates
// nothing per request in steady state (RF 1: it completes in ProduceStart, on the caller's
// goroutine, which answers it).
func TestProduceStartDoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", 1, 1, nil)
	l := c.leader("t", 0)
	tmpl := batch("z", 5)
	blob := make([]byte, len(tmpl))
	parts := []ProducePartition{{Topic: "t", Partition: 0}}
	ctx := context.Background()
	a := NewAckWaiter()
	answers := 0
	answer := func() { answers++ }
	allocs := testing.AllocsPerRun(200, func() {
		copy(blob, tmpl)
		parts[0].Records = blob
		if wait, _ := l.ProduceStart(ctx, -1, parts, a, answer); !wait {
			t.Fatal("acks=all did not wait")
		}
		if answered, _ := a.Wait(ctx, time.Second); !answered || parts[0].Err != nil {
			t.Fatalf("answered %v: %v", answered, parts[0].Err)
		}
	})
	if allocs > 0 {
		t.Errorf("ProduceStart+Wait acks=all allocates %.1f times per call", allocs)
	}
	if answers != 201 {
		t.Errorf("%d answers for 201 produces", answers)
	}
}
