package broker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
)

// TestReplicationQuotaRate pins Kafka's SimpleRate as the quota measures it: the bytes of the
// samples kept over the time since the oldest began, at least one window; exceeded only
// above the bound; samples older than samples x window are dropped.
func TestReplicationQuotaRate(t *testing.T) {
	var now atomic.Int64
	q := newReplicationQuota(now.Load, 3, time.Second)
	if q.Exceeded() || q.Rate() != 0 {
		t.Fatalf("new quota: exceeded %v rate %v", q.Exceeded(), q.Rate())
	}
	q.Record(5000)
	if q.Exceeded() {
		t.Fatal("unlimited quota exceeded")
	}
	q.SetBound(4000)
	for _, step := range []struct {
		advance  time.Duration
		record   int64
		rate     float64
		exceeded bool
	}{
		{0, 0, 5000, true},                      // 5000 B over one window (the minimum)
		{500 * time.Millisecond, 0, 5000, true}, // still within the first window
		{time.Second, 0, 5000. / 1.5, false},    // 1.5 s since the oldest sample began
		{0, 1000, 6000. / 1.5, false},           // a second sample; 4000 B/s is not above the bound
		{0, 1, 6001. / 1.5, true},
		{2 * time.Second, 0, 1001. / 2, false}, // the first sample (3 s old) is dropped
	} {
		now.Add(int64(step.advance))
		q.Record(step.record)
		if got := q.Rate(); math.Abs(got-step.rate) > 1e-6 || q.Exceeded() != step.exceeded {
			t.Fatalf("at %v after recording %d: rate %.3f exceeded %v, want %.3f %v",
				time.Duration(now.Load()), step.record, got, q.Exceeded(), step.rate, step.exceeded)
		}
	}
	if q.Total() != 6001 {
		t.Fatalf("total %d", q.Total())
	}
}

func TestThrottledOn(t *testing.T) {
	for _, tc := range []struct {
		v    string
		p, b int32
		want bool
	}{
		{"", 0, 1, false}, {"*", 3, 9, true}, {" * ", 0, 0, true},
		{"0:1,1:2", 0, 1, true}, {"0:1,1:2", 1, 2, true}, {"0:1,1:2", 0, 2, false}, {"0:1, 1:2 ", 1, 2, true},
		{"bad", 0, 1, false}, {"1:", 1, 0, false},
	} {
		if got := ThrottledOn(tc.v, tc.p, tc.b); got != tc.want {
			t.Errorf("ThrottledOn(%q, %d, %d) = %v, want %v", tc.v, tc.p, tc.b, got, tc.want)
		}
	}
}

// TestThrottledCatchUp adds a replica to a partition holding ~1 MiB and counts, window by
// window of an injected clock, the bytes of the throttled replica's catch-up recorded by
// the quota: with the leader's or the follower's quota at 128 KiB/s each window carries at
// most the bound plus one fetch response, so the catch-up takes many windows; with the
// throttled replicas set but no rate it is all done in the first window. The quotas' clock
// only moves when the test advances it, so the counts do not depend on the machine's speed.
func TestThrottledCatchUp(t *testing.T) {
	const (
		bound    = 128 << 10
		maxBytes = 16 << 10 // replica.fetch.max.bytes: the most one response adds
		batches  = 64
		batchLen = 16 << 10
	)
	for _, tc := range []struct {
		name   string
		side   string // "leader" or "follower"
		rate   int64  // 0: the throttled replicas set, no rate
		minWin int
	}{
		{"leader unthrottled", "leader", 0, 1},
		{"leader throttled", "leader", bound, batches * batchLen / (bound + maxBytes)},
		{"follower throttled", "follower", bound, batches * batchLen / (bound + maxBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(int64(time.Hour))
			cfg := testConfig()
			cfg.QuotaNow = clock.Load
			cfg.ReplicaFetchMaxBytes = maxBytes
			c := newTestCluster(t, 3, cfg)
			c.createTopic("t", 1, 2, nil)
			st, _ := c.ctrl.Partition("t", 0)
			var added int32
			for id := int32(0); id < 3; id++ {
				if !slices.Contains(st.Replicas, id) {
					added = id
				}
			}
			value := make([]byte, batchLen-100)
			for i := 0; i < batches; i++ {
				blob := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), []records.Record{{Value: value}})
				if pp := produce(t, c.leader("t", 0), -1, "t", 0, blob); pp.Err != nil {
					t.Fatal(pp.Err)
				}
			}
			leader := c.broker(st.Leader)
			quota, throttledOn, topicKey, rateKey := leader.LeaderQuota(), st.Leader, controller.ConfigLeaderThrottledReplicas, LeaderThrottledRate
			if tc.side == "follower" {
				quota, throttledOn, topicKey, rateKey = c.broker(added).FollowerQuota(), added, controller.ConfigFollowerThrottledReplicas, FollowerThrottledRate
			}
			if err := c.ctrl.ChangeTopicConfig("t", controller.ConfigChange{Set: map[string]string{topicKey: "*"}}); err != nil {
				t.Fatal(err)
			}
			if tc.rate > 0 {
				err := c.ctrl.ChangeBrokerConfig(strconv.Itoa(int(throttledOn)), controller.ConfigChange{Set: map[string]string{rateKey: strconv.FormatInt(tc.rate, 10)}})
				if err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, id := range c.ids() {
				if err := c.ctrl.Sync(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if want := cmp.Or(tc.rate, math.MaxInt64); quota.Bound() != want {
				t.Fatalf("quota bound %d, want %d", quota.Bound(), want)
			}
			target := append(slices.Clone(st.Replicas), added)
			if errs := c.ctrl.AlterPartitionReassignments([]controller.Reassignment{{Topic: "t", Partition: 0, Replicas: target}}, true); errs[0] != nil {
				t.Fatal(errs[0])
			}
			var perWindow []int64
			last := int64(0)
			for w := 0; ; w++ {
				if w > 200 {
					t.Fatalf("no catch-up after %d windows: %v", w, perWindow)
				}
				done := false
				c.waitFor(fmt.Sprintf("window %d: quota exceeded or caught up", w), 20*time.Second, func() bool {
					cur, _ := c.ctrl.Partition("t", 0)
					done = !cur.Reassigning()
					return done || quota.Exceeded()
				})
				total := quota.Total()
				perWindow = append(perWindow, total-last)
				last = total
				if done {
					break
				}
				clock.Add(int64(quotaWindow))
			}
			t.Logf("bytes recorded per %v window: %v", quotaWindow, perWindow)
			if len(perWindow) < tc.minWin {
				t.Errorf("caught up in %d windows, want at least %d", len(perWindow), tc.minWin)
			}
			if tc.rate > 0 {
				for i, n := range perWindow {
					if n > tc.rate+maxBytes {
						t.Errorf("window %d carried %d bytes, above the bound %d plus one response %d", i, n, tc.rate, maxBytes)
					}
				}
			} else if len(perWindow) != 1 || perWindow[0] < batches*batchLen*9/10 {
				t.Errorf("without a rate: %v bytes per window, want the whole log in the first", perWindow)
			}
			c.assertReplicasIdentical("t", 0)
		})
	}
}
