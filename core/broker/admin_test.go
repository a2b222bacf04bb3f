package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
)

func strayDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), StraySuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestDeleteTopicRemovesReplicas(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("d", 2, 3, nil)
	c.createTopic("keep", 1, 3, nil)
	for p := int32(0); p < 2; p++ {
		if res := produce(t, c.leader("d", p), -1, "d", p, batch("x", 5)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	for _, id := range c.ids() {
		if err := c.broker(id).WriteHWCheckpoint(); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.leader("d", 0)
	if err := c.ctrl.DeleteTopic("d"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range c.ids() {
		if err := c.ctrl.Sync(ctx, id); err != nil { // the deletion is applied
			t.Fatal(err)
		}
	}
	for _, id := range c.ids() {
		b := c.broker(id)
		for p := int32(0); p < 2; p++ {
			if _, ok := b.Replica("d", p); ok {
				t.Errorf("broker %d still hosts d-%d", id, p)
			}
		}
		for p := 0; p < 2; p++ {
			if _, err := os.Stat(filepath.Join(c.dirs[id], "d-"+strconv.Itoa(p))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("broker %d: directory d-%d still there (%v)", id, p, err)
			}
		}
		for _, f := range b.Fetchers() {
			for _, fp := range f.Partitions() {
				if fp.Topic == "d" {
					t.Errorf("broker %d fetcher %d-%d still fetches d-%d", id, f.Source(), f.Index(), fp.Partition)
				}
			}
		}
		hws, err := readHWCheckpointFile(filepath.Join(c.dirs[id], HWCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := hws["d-0"]; ok {
			t.Errorf("broker %d HW checkpoint keeps d-0: %v", id, hws)
		}
		if _, ok := hws["keep-0"]; !ok {
			t.Errorf("broker %d HW checkpoint lost keep-0: %v", id, hws)
		}
		if b.LogDirOffline() != nil {
			t.Errorf("broker %d: log dir offline after a deletion: %v", id, b.LogDirOffline())
		}
	}
	if res := produce(t, leader, -1, "d", 0, batch("late", 1)); !errors.Is(res.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("produce to a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", res.Err)
	}
	// The name can be used again: the new topic starts empty, with no inherited HW.
	c.createTopic("d", 1, 3, nil)
	for _, id := range c.ids() {
		r, ok := c.broker(id).Replica("d", 0)
		if !ok || r.LEO() != 0 || r.HW() != 0 {
			t.Fatalf("broker %d: re-created d-0 %v LEO %d HW %d, want an empty replica", id, ok, r.LEO(), r.HW())
		}
	}
	if got := c.ctrl.Damaged("d", 0); len(got) != 0 {
		t.Errorf("re-created d-0 has damaged replicas %v", got)
	}
	if res := produce(t, c.leader("d", 0), -1, "d", 0, batch("new", 2)); res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("produce to the re-created topic: offset %d, %v", res.BaseOffset, res.Err)
	}
	c.assertReplicasIdentical("keep", 0)
}

// A broker that was down while its topic was deleted (and then created again with it as a
// replica) sets the old directories aside when it starts: it does not adopt another topic
// incarnation's data, and a deleted topic's directory is not left as if it were live.
func TestStrayReplicasSetAsideAtStart(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("gone", 1, 3, nil)
	c.createTopic("again", 1, 3, nil)
	for _, tp := range []string{"gone", "again"} {
		if res := produce(t, c.leader(tp, 0), -1, tp, 0, batch("old", 7)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	const down = 2
	c.waitFor("broker 2 caught up", 10*time.Second, func() bool {
		for _, tp := range []string{"gone", "again"} {
			if r, ok := c.broker(down).Replica(tp, 0); !ok || r.LEO() != 7 {
				return false
			}
		}
		return true
	})
	if err := c.broker(down).Close(); err != nil { // clean stop: HW checkpoint written
		t.Fatal(err)
	}
	// Deleted and created again while broker 2 is down but not yet fenced (as after a kill,
	// before its session expires): broker 2 is a replica of the new "again".
	for _, tp := range []string{"gone", "again"} {
		if err := c.ctrl.DeleteTopic(tp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ctrl.CreateTopic("again", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	c.ctrl.BrokerDown(down)
	c.waitFor("the new again-0 led", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("again", 0)
		r, ok := c.broker(st.Leader).Replica("again", 0)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
	})
	if res := produce(t, c.leader("again", 0), -1, "again", 0, batch("new", 2)); res.Err != nil {
		t.Fatal(res.Err)
	}
	b := c.start(down)
	c.waitFor("broker 2 rejoins again-0's ISR", 10*time.Second, func() bool {
		return len(isrOf(c, "again", 0)) == 3
	})
	if got := strayDirs(t, c.dirs[down]); len(got) != 2 {
		t.Errorf("stray directories %v, want gone-0 and again-0 set aside", got)
	}
	if _, err := os.Stat(filepath.Join(c.dirs[down], "gone-0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone-0 still in place: %v", err)
	}
	r, _ := b.Replica("again", 0)
	vals, _ := consume(t, c.leader("again", 0), "again", 0, 0)
	if r.LEO() != 2 || !slices.Equal(vals, []string{"new-0", "new-1"}) {
		t.Errorf("again-0 on broker 2: LEO %d, leader holds %v; want only the new topic's 2 records", r.LEO(), vals)
	}
	c.assertReplicasIdentical("again", 0)
}

// TestResizeFetchersUnderLoad changes num.replica.fetchers as a dynamic cluster-wide config
// while producers write with acks=all: the partitions move to FetcherFor(t, p, n), the
// fetchers of removed indexes stop, no acknowledged record is lost or duplicated and the
// replicas end identical.
func TestResizeFetchersUnderLoad(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	const parts = 8
	c.createTopic("r", parts, 3, map[string]string{"min.insync.replicas": "2"})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int32][]string{}
	errc := make(chan error, parts)
	for p := int32(0); p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				st, _ := c.ctrl.Partition("r", p)
				pp := []ProducePartition{{Topic: "r", Partition: p, Records: batch(fmt.Sprintf("p%d-%d", p, i), 2)}}
				c.broker(st.Leader).Produce(context.Background(), -1, 5*time.Second, pp)
				if pp[0].Err != nil {
					errc <- fmt.Errorf("r-%d: %w", p, pp[0].Err)
					return
				}
				mu.Lock()
				acked[p] = append(acked[p], fmt.Sprintf("p%d-%d-0", p, i), fmt.Sprintf("p%d-%d-1", p, i))
				mu.Unlock()
			}
		}()
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range acked {
			n += len(a)
		}
		return n
	}
	for _, n := range []int{4, 2, 3, 8, 1} {
		before := map[int32][]*Fetcher{}
		for _, id := range c.ids() {
			before[id] = c.broker(id).Fetchers()
		}
		if err := c.ctrl.ChangeBrokerConfig("", controller.ConfigChange{Set: map[string]string{"num.replica.fetchers": strconv.Itoa(n)}}); err != nil {
			t.Fatal(err)
		}
		c.waitFor(fmt.Sprintf("num.replica.fetchers %d applied", n), 10*time.Second, func() bool {
			for _, id := range c.ids() {
				if c.broker(id).NumReplicaFetchers() != n {
					return false
				}
			}
			return true
		})
		for _, id := range c.ids() {
			b := c.broker(id)
			for _, f := range b.Fetchers() {
				if f.Index() >= n {
					t.Errorf("n=%d: broker %d still has fetcher %d-%d", n, id, f.Source(), f.Index())
				}
				for _, fp := range f.Partitions() {
					if want := FetcherFor(fp.Topic, fp.Partition, n); want != f.Index() {
						t.Errorf("n=%d: broker %d: %s-%d on fetcher %d, want %d", n, id, fp.Topic, fp.Partition, f.Index(), want)
					}
				}
			}
			for _, f := range before[id] {
				if f.Index() < n {
					continue
				}
				select {
				case <-f.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("n=%d: broker %d: removed fetcher %d-%d did not stop", n, id, f.Source(), f.Index())
				}
			}
		}
		// Replication keeps going on the new fetchers.
		target := progress() + 40
		c.waitFor(fmt.Sprintf("progress with %d fetchers", n), 20*time.Second, func() bool { return progress() >= target })
	}
	stop()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	c.waitFor("every replica caught up", 20*time.Second, func() bool {
		for p := int32(0); p < parts; p++ {
			st, _ := c.ctrl.Partition("r", p)
			lr, _ := c.broker(st.Leader).Replica("r", p)
			if len(st.ISR) != 3 || lr.HW() != lr.LEO() {
				return false
			}
			for _, id := range st.Replicas {
				if r, ok := c.broker(id).Replica("r", p); !ok || r.LEO() != lr.LEO() {
					return false
				}
			}
		}
		return true
	})
	for p := int32(0); p < parts; p++ {
		vals, _ := consume(t, c.leader("r", p), "r", p, 0)
		if !slices.Equal(vals, acked[p]) {
			t.Errorf("r-%d: leader holds %d records, %d acknowledged (lost, duplicated or reordered)", p, len(vals), len(acked[p]))
		}
		c.assertReplicasIdentical("r", p)
	}
}

// Dynamic min.insync.replicas and log.* defaults reconfigure the replicas without a topic
// override; a topic override keeps winning.
func TestDynamicBrokerConfigsReconfigureReplicas(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("plain", 1, 3, nil)
	c.createTopic("own", 1, 3, map[string]string{"min.insync.replicas": "1", "segment.bytes": "5000"})
	if err := c.ctrl.ChangeBrokerConfig("", controller.ConfigChange{Set: map[string]string{
		"min.insync.replicas": "3", "log.segment.bytes": "4096", "log.retention.ms": "12345",
	}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ctrl.ChangeBrokerConfig("1", controller.ConfigChange{Set: map[string]string{"log.retention.ms": "777"}}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("configs applied", 10*time.Second, func() bool {
		for _, id := range c.ids() {
			h := c.broker(id).lookup("plain", 0)
			want := int64(12345)
			if id == 1 {
				want = 777
			}
			if h == nil || h.r.Config().MinInsyncReplicas != 3 || h.l.Config().SegmentBytes != 4096 || h.l.Config().RetentionMs != want {
				return false
			}
		}
		return true
	})
	for _, id := range c.ids() {
		h := c.broker(id).lookup("own", 0)
		if got := h.r.Config().MinInsyncReplicas; got != 1 {
			t.Errorf("broker %d: own-0 min.insync.replicas %d, want the topic's 1", id, got)
		}
		if got := h.l.Config().SegmentBytes; got != 5000 {
			t.Errorf("broker %d: own-0 segment.bytes %d, want the topic's 5000", id, got)
		}
		if got := h.l.Config().RetentionMs; id != 1 && got != 12345 {
			t.Errorf("broker %d: own-0 retention.ms %d, want the dynamic default 12345", id, got)
		}
	}
	// min.insync.replicas 3 applies: with a follower paused out of the ISR, acks=all fails.
	st, _ := c.ctrl.Partition("plain", 0)
	follower := st.Replicas[1]
	if st.Leader == follower {
		follower = st.Replicas[0]
	}
	c.broker(follower).Pause()
	if _, err := c.ctrl.AlterPartition(controller.AlterPartitionRequest{
		Topic: "plain", Partition: 0, Leader: st.Leader, LeaderBrokerEpoch: -1,
		LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		ISR: slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return id == follower }),
	}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("leader sees the shrunk ISR", 10*time.Second, func() bool {
		r, _ := c.broker(st.Leader).Replica("plain", 0)
		return len(r.ISR()) == 2
	})
	if res := produce(t, c.broker(st.Leader), -1, "plain", 0, batch("x", 1)); !errors.Is(res.Err, kerr.NotEnoughReplicas) {
		t.Errorf("acks=all with ISR 2 < min.insync.replicas 3: %v, want NOT_ENOUGH_REPLICAS", res.Err)
	}
	c.broker(follower).Resume()
}

// TestLeadsWhatItApplied: a broker leads a partition (Leads, what Metadata shows) only once it
// has applied the controller's state: not while a new topic's state is still on its way, not
// in a leader epoch it has not reached, and not for a topic deleted and created again under
// the same name while it still holds the old incarnation's replica.
func TestLeadsWhatItApplied(t *testing.T) {
	ctrl := controller.New(controller.Config{ManualDelivery: true, BrokerSessionTimeoutMs: 60000})
	cfg := testConfig()
	cfg.ID, cfg.DataDir, cfg.Addr, cfg.Manual = 0, t.TempDir(), "127.0.0.1:9092", true
	var b *Broker
	b, err := New(cfg, ctrl, NewLocalTransport(func(int32) *Broker { return b }))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	create := func() controller.TopicID {
		t.Helper()
		if _, err := ctrl.CreateTopic("t", 1, 1, nil); err != nil {
			t.Fatal(err)
		}
		id, _ := ctrl.TopicID("t")
		return id
	}
	first := create()
	if b.Leads("t", first, 0, 0) {
		t.Error("leads t-0 before it applied the new topic")
	}
	ctrl.DeliverPending(0, 0)
	if !b.Leads("t", first, 0, 0) || !b.Leads("t", controller.TopicID{}, 0, 0) {
		t.Error("does not lead t-0 after applying it")
	}
	if b.Leads("t", first, 0, 1) {
		t.Error("leads t-0 in leader epoch 1, which it never applied")
	}
	if err := ctrl.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	second := create()
	if b.Leads("t", second, 0, 0) {
		t.Error("the replica of the deleted t leads the new t")
	}
	ctrl.DeliverPending(0, 0)
	if !b.Leads("t", second, 0, 0) || b.Leads("t", first, 0, 0) {
		t.Error("after applying the deletion and the new t, the broker does not lead the new t-0 alone")
	}
}

// A replica whose partition.metadata holds its topic's legacy id (the creation number, as
// written before topic ids were random) belongs to the topic: a restarted broker keeps its
// data and rewrites the file with the topic's id; a foreign id still sets it aside.
func TestLegacyTopicIDAccepted(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("legacy", 1, 3, nil)
	if res := produce(t, c.leader("legacy", 0), -1, "legacy", 0, batch("v", 4)); res.Err != nil {
		t.Fatal(res.Err)
	}
	const down = 2
	c.waitFor("broker 2 caught up", 10*time.Second, func() bool {
		r, ok := c.broker(down).Replica("legacy", 0)
		return ok && r.LEO() == 4 && r.HW() == 4
	})
	if err := c.broker(down).Close(); err != nil {
		t.Fatal(err)
	}
	legacy, _ := c.ctrl.LegacyTopicID("legacy")
	id, _ := c.ctrl.TopicID("legacy")
	if legacy == (controller.TopicID{}) || legacy == id {
		t.Fatalf("legacy id %v, id %v", legacy, id)
	}
	path := filepath.Join(c.dirs[down], "legacy-0", PartitionMetadataFile)
	if err := os.WriteFile(path, []byte("version: 0\ntopic_id: "+legacy.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := c.start(down)
	c.waitFor("broker 2 rejoins the ISR", 10*time.Second, func() bool { return len(isrOf(c, "legacy", 0)) == 3 })
	if got := strayDirs(t, c.dirs[down]); len(got) != 0 {
		t.Errorf("stray directories %v: the legacy id was taken for another incarnation", got)
	}
	if r, _ := b.Replica("legacy", 0); r.LogStart() != 0 || r.LEO() != 4 {
		t.Errorf("legacy-0 on broker 2: log [%d, %d), want its 4 records kept", r.LogStart(), r.LEO())
	}
	data, err := os.ReadFile(path)
	if got, ok := parsePartitionMetadata(data); err != nil || !ok || got != id {
		t.Errorf("%s: %q (%v), want topic_id %v", path, data, err, id)
	}
}
