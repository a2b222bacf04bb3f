package broker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// TestFetchWaitAboveLagRefused: Kafka refuses to start with replica.fetch.wait.max.ms above
// replica.lag.time.max.ms (a parked fetch would drop the follower from the ISR).
func TestFetchWaitAboveLagRefused(t *testing.T) {
	cfg := testConfig()
	cfg.DataDir = t.TempDir()
	cfg.ReplicaLagTimeMaxMs = 100
	cfg.ReplicaFetchWaitMaxMs = 500
	_, err := New(cfg, controller.New(controller.Config{}), NewLocalTransport(func(int32) *Broker { return nil }))
	if err == nil || !strings.Contains(err.Error(), "replica.fetch.wait.max.ms (500) must be <= replica.lag.time.max.ms (100)") {
		t.Fatalf("New: %v", err)
	}
}

// TestFetchWaitAboveSocketTimeoutRefused: Kafka refuses to start with replica.fetch.wait.max.ms
// above replica.socket.timeout.ms (a parked fetch would be taken for a dead leader); the
// timeout is read from the broker's Settings.
func TestFetchWaitAboveSocketTimeoutRefused(t *testing.T) {
	cfg := testConfig()
	cfg.DataDir = t.TempDir()
	cfg.ReplicaFetchWaitMaxMs = 500
	if err := cfg.Settings.Set("replica.socket.timeout.ms", "400"); err != nil {
		t.Fatal(err)
	}
	_, err := New(cfg, controller.New(controller.Config{}), NewLocalTransport(func(int32) *Broker { return nil }))
	if err == nil || !strings.Contains(err.Error(), "replica.socket.timeout.ms (400) must be >= replica.fetch.wait.max.ms (500)") {
		t.Fatalf("New: %v", err)
	}
	cfg.Settings, _ = cfg.Settings.With("replica.socket.timeout.ms", "500")
	b, err := New(cfg, controller.New(controller.Config{}), NewLocalTransport(func(int32) *Broker { return nil }))
	if err != nil {
		t.Fatalf("replica.socket.timeout.ms = replica.fetch.wait.max.ms: %v", err)
	}
	b.Close()
}

// TestTopicConfigsApplied: topic configs are applied to every replica when the topic is
// created and when they change at run time; configs of features isrbench does not have are
// refused instead of accepted and ignored.
func TestTopicConfigsApplied(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"segment.bytes": "65536", "retention.bytes": "1000000"})
	check := func(what string, ok func(h *hosted) bool) {
		t.Helper()
		c.waitFor(what, 10*time.Second, func() bool {
			for _, id := range c.ids() {
				h := c.broker(id).lookup("t", 0)
				if h == nil || !ok(h) {
					return false
				}
			}
			return true
		})
	}
	check("creation configs on every replica", func(h *hosted) bool {
		lc := h.l.Config()
		return lc.SegmentBytes == 65536 && lc.RetentionBytes == 1000000
	})
	if err := c.ctrl.AlterTopicConfig("t", map[string]string{"segment.bytes": "32768", "min.insync.replicas": "3", "flush.messages": "1"}, []string{"retention.bytes"}); err != nil {
		t.Fatal(err)
	}
	check("changed configs on every replica", func(h *hosted) bool {
		lc := h.l.Config()
		return lc.SegmentBytes == 32768 && lc.RetentionBytes == c.cfg.Log.RetentionBytes && lc.FlushMessages == 1 && h.r.Config().MinInsyncReplicas == 3
	})
	for k, v := range map[string]string{"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime", "compression.type": "gzip", "segment.ms": "1000"} {
		if err := c.ctrl.AlterTopicConfig("t", map[string]string{k: v}, nil); !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), "isrbench supports only") {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG saying what is supported", k, v, err)
		}
	}
}

// TestDamagedReplicaDoesNotLead: a replica whose directory was deleted comes back as the
// last ISR member of an offline partition; recovery reports it damaged and the controller
// does not elect it, though it is the ISR: the partition stays offline rather than lead
// with an empty log. (Before, it led with an empty log and every record was lost.)
func TestDamagedReplicaDoesNotLead(t *testing.T) {
	cfg := testConfig()
	var (
		mu   sync.Mutex
		logs []string
	)
	cfg.Logf = func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, f)
	}
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "1"})
	l := c.leader("t", 0)
	for i := 0; i < 5; i++ {
		if res := produce(t, l, -1, "t", 0, batch("d", 10)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	st, _ := c.ctrl.Partition("t", 0)
	for _, id := range c.ids() {
		if err := c.broker(id).WriteHWCheckpoint(); err != nil {
			t.Fatal(err)
		}
	}
	// Kill the replicas one by one, fenced at once: the last one standing is the last ISR member.
	order := slices.Clone(st.Replicas)
	last := order[len(order)-1]
	for _, id := range order {
		c.broker(id).Kill()
		c.ctrl.BrokerDown(id)
	}
	if st, _ := c.ctrl.Partition("t", 0); st.Leader != controller.NoLeader || !slices.Equal(st.ISR, []int32{last}) {
		t.Fatalf("after the kills: %v, want offline with ISR [%d]", st, last)
	}
	if err := os.RemoveAll(filepath.Join(c.dirs[last], "t-0")); err != nil {
		t.Fatal(err)
	}
	c.start(last)
	if d := c.ctrl.Damaged("t", 0); !slices.Equal(d, []int32{last}) {
		t.Fatalf("damaged replicas %v, want [%d]", d, last)
	}
	if st, _ := c.ctrl.Partition("t", 0); st.Leader != controller.NoLeader {
		t.Fatalf("the damaged replica leads: %v", st)
	}
	reported := false
	mu.Lock()
	defer mu.Unlock()
	for _, f := range logs {
		reported = reported || strings.Contains(f, "replica damaged")
	}
	if !reported {
		t.Error("recovery did not report the damaged replica")
	}
}

// TestDiskFullTakesLogDirOffline: a write failure (a full disk) takes the broker's log
// directory offline: produce answers KAFKA_STORAGE_ERROR, the controller is told and moves
// leadership to a healthy ISR member, which keeps taking acks=all writes.
func TestDiskFullTakesLogDirOffline(t *testing.T) {
	c := newTestCluster(t, 0, testConfig())
	efs := vfs.NewErrorFS(vfs.OS)
	c.bases = map[int32]vfs.FS{0: efs}
	for id := int32(0); id < 3; id++ {
		c.addBroker(id)
	}
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.ctrl.ElectLeader("t", 0, false); err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatal(err)
	}
	c.waitFor("broker 0 leads", 10*time.Second, func() bool {
		r, ok := c.broker(0).Replica("t", 0)
		return ok && r.IsLeader()
	})
	if res := produce(t, c.broker(0), -1, "t", 0, batch("a", 5)); res.Err != nil {
		for _, id := range c.ids() {
			for _, f := range c.broker(id).Fetchers() {
				t.Logf("broker %d fetcher from %d: %+v", id, f.Source(), f.Partitions())
			}
			t.Logf("broker %d: %+v", id, c.broker(id).Partitions())
		}
		t.Fatal(res.Err)
	}
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	if res := produce(t, c.broker(0), -1, "t", 0, batch("b", 5)); !errors.Is(res.Err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", res.Err)
	}
	if err := c.broker(0).LogDirOffline(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("LogDirOffline = %v", err)
	}
	c.waitFor("leadership moved off the offline broker", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		if st.Leader <= 0 || slices.Contains(st.ISR, 0) {
			return false
		}
		r, ok := c.broker(st.Leader).Replica("t", 0)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
	})
	if res := produce(t, c.leader("t", 0), -1, "t", 0, batch("c", 5)); res.Err != nil {
		t.Fatalf("acks=all on the new leader: %v", res.Err)
	}
}
