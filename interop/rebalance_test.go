package interop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// timings are the measured rebalance times, printed by TestMain.
var timings struct {
	sync.Mutex
	lines []string
}

func addTiming(format string, args ...any) {
	timings.Lock()
	timings.lines = append(timings.lines, fmt.Sprintf(format, args...))
	timings.Unlock()
}

// TestRebalanceTime measures how long a two-member group takes to give every partition to
// the survivor after the other member leaves (kcat on SIGTERM: LeaveGroup) and after it is
// killed (SIGKILL: the coordinator notices when its session.timeout.ms of 10 s expires).
// The survivor is a franz-go group member with the range balancer and Kafka's default
// heartbeat.interval.ms of 3 s: it learns of the rebalance on its next heartbeat. Reported:
// signal -> survivor assigned every partition, and the coordinator's own
// PreparingRebalance -> Stable time.
func TestRebalanceTime(t *testing.T) {
	kcat := needKcat(t)
	c := startCluster(t)
	for i, tc := range []struct {
		name      string
		sig       syscall.Signal
		heartbeat time.Duration // the survivor's heartbeat.interval.ms
	}{
		{"LeaveGroup (SIGTERM), survivor heartbeat.interval.ms=3000", syscall.SIGTERM, 3 * time.Second},
		{"LeaveGroup (SIGTERM), survivor heartbeat.interval.ms=100", syscall.SIGTERM, 100 * time.Millisecond},
		{"killed (SIGKILL, session.timeout.ms=10000), survivor heartbeat.interval.ms=3000", syscall.SIGKILL, 3 * time.Second},
	} {
		t.Run(strings.Fields(tc.name)[0], func(t *testing.T) {
			topic := fmt.Sprintf("rebalance-%d", i)
			group := topic + "-group"
			createTopic(t, c, topic, 4)
			type assignment struct {
				at time.Time
				n  int
			}
			assigned := make(chan assignment, 16)
			cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
				kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()), kgo.HeartbeatInterval(tc.heartbeat),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					assigned <- assignment{time.Now(), len(m[topic])}
				}))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			polled := make(chan struct{})
			go func() {
				defer close(polled)
				for ctx.Err() == nil {
					cl.PollFetches(ctx)
				}
			}()
			defer func() { cancel(); <-polled; cl.Close() }()
			waitAssigned := func(what string, n int) time.Time {
				t.Helper()
				deadline := time.NewTimer(60 * time.Second)
				defer deadline.Stop()
				for {
					select {
					case a := <-assigned:
						if a.n == n {
							return a.at
						}
					case <-deadline.C:
						t.Fatalf("%s: the franz-go member was not assigned %d partitions within 60 s", what, n)
					}
				}
			}
			waitAssigned("alone", 4)
			m := startMember(t, kcat, c.Bootstrap(), group, topic, "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=1000")
			waitAssigned("kcat joined", 2)
			m.waitFor(t, "kcat assigned", 30*time.Second, func(w *watched) bool { return len(w.assigns) > 0 })
			start := time.Now()
			m.cmd.Process.Signal(tc.sig)
			end := waitAssigned("after "+tc.name, 4)
			<-m.done
			coord := groupCoordinatorStats(c, group)
			last := "n/a"
			if len(coord) > 0 {
				last = fmt.Sprintf("%.0f ms", coord[len(coord)-1])
			}
			addTiming("%s: %v from the signal to the survivor owning all 4 partitions; coordinator PreparingRebalance -> Stable %s",
				tc.name, end.Sub(start).Round(time.Millisecond), last)
			t.Logf("%s: %v (coordinator: %s)", tc.name, end.Sub(start).Round(time.Millisecond), last)
		})
	}
}
