package controller

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

// updates records every Update delivered to one subscriber.
type updates struct {
	mu  sync.Mutex
	got []Update
}

func (u *updates) fn(up Update) {
	u.mu.Lock()
	u.got = append(u.got, up)
	u.mu.Unlock()
}

func (u *updates) all() []Update {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.got)
}

func TestDeleteTopic(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "keep", 1, 3, nil)
	mustCreate(t, c, "gone", 3, 2, map[string]string{"retention.ms": "5"})
	id1, _ := c.TopicID("gone")
	var r1 updates
	defer c.Subscribe(1, r1.fn)()
	if err := c.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic("gone"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("second delete: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if _, ok := c.Partitions("gone"); ok || slices.Contains(c.Topics(), "gone") || c.TopicConfig("gone") != nil {
		t.Errorf("deleted topic still visible: topics %v", c.Topics())
	}
	if err := c.Sync(syncCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	got := r1.all()
	last := got[len(got)-1]
	if last.Topic == nil || last.Topic.Name != "gone" || !last.Topic.Deleted {
		t.Errorf("broker 1's last update %+v, want the deletion of gone", last)
	}
	// The name is free again, for a new incarnation with a new id.
	mustCreate(t, c, "gone", 1, 1, nil)
	id2, _ := c.TopicID("gone")
	if id1 == (TopicID{}) || id2 == id1 {
		t.Errorf("topic ids %v then %v: want distinct non-zero ids", id1, id2)
	}
	if cfg := c.TopicConfig("gone"); len(cfg) != 0 {
		t.Errorf("re-created topic inherited configs %v", cfg)
	}
	checkInvariants(t, c)
}

func TestCreatePartitions(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "first", 1, 1, nil) // moves the next topic's start
	orig := mustCreate(t, c, "t", 2, 2, nil)
	var r2 updates
	defer c.Subscribe(2, r2.fn)()
	if _, err := c.CreatePartitions("t", 5, nil, true); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if ps := mustPartitions(t, c, "t"); len(ps) != 2 {
		t.Fatalf("validate only created partitions: %d", len(ps))
	}
	added, err := c.CreatePartitions("t", 5, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// The pattern of CreateTopic continues: as if the topic had been created with 5.
	ref, _ := newTestController(t, 3, Config{})
	mustCreate(t, ref, "first", 1, 1, nil)
	want := mustCreate(t, ref, "t", 5, 2, nil)
	if len(added) != 3 {
		t.Fatalf("added %d partitions, want 3", len(added))
	}
	for i, st := range append(orig, added...) {
		if !slices.Equal(st.Replicas, want[i].Replicas) || st.Leader != want[i].Replicas[0] || !slices.Equal(st.ISR, st.Replicas) || st.Partition != int32(i) {
			t.Errorf("partition %d: %v, want replicas %v", i, st, want[i].Replicas)
		}
	}
	for _, tc := range []struct {
		name   string
		count  int32
		assign [][]int32
		want   *kerr.Error
	}{
		{"same count", 5, nil, kerr.InvalidPartitions},
		{"decrease", 4, nil, kerr.InvalidPartitions},
		{"too many", MaxPartitions + 1, nil, kerr.InvalidPartitions},
		{"assignments != added", 7, [][]int32{{1, 2}}, kerr.InvalidReplicaAssignment},
		{"empty list", 6, [][]int32{{}}, kerr.InvalidReplicaAssignment},
		{"unknown broker", 6, [][]int32{{1, 9}}, kerr.InvalidReplicaAssignment},
		{"duplicate broker", 6, [][]int32{{2, 2}}, kerr.InvalidReplicaAssignment},
		{"wrong rf", 6, [][]int32{{1, 2, 3}}, kerr.InvalidReplicaAssignment},
	} {
		if _, err := c.CreatePartitions("t", tc.count, tc.assign, false); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := c.CreatePartitions("nope", 2, nil, false); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", err)
	}
	// A manual assignment may name a fenced broker; the ISR is its alive replicas.
	c.BrokerDown(3)
	added, err = c.CreatePartitions("t", 6, [][]int32{{3, 2}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if st := added[0]; st.Leader != 2 || !slices.Equal(st.ISR, []int32{2}) || !slices.Equal(st.Replicas, []int32{3, 2}) {
		t.Errorf("manual partition with broker 3 fenced: %v, want leader 2, ISR [2]", st)
	}
	if _, err := c.CreatePartitions("t", 7, [][]int32{{3}}, false); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("all assigned brokers fenced: %v", err)
	}
	c.BrokerDown(2)
	if _, err := c.CreatePartitions("t", 7, nil, false); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("rf 2 with one alive broker: %v", err)
	}
	if err := c.Sync(syncCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for _, u := range r2.all() {
		if u.Partition != nil && u.Partition.Topic == "t" {
			seen[u.Partition.Partition] = true
		}
	}
	for _, st := range mustPartitions(t, c, "t") {
		if slices.Contains(st.Replicas, 2) && !seen[st.Partition] {
			t.Errorf("broker 2 hosts t-%d but was not told", st.Partition)
		}
	}
	checkInvariants(t, c)
}

func TestBrokerConfigs(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	var r1, r2 updates
	defer c.Subscribe(1, r1.fn)()
	defer c.Subscribe(2, r2.fn)()
	for _, tc := range []struct {
		name string
		res  string
		ch   ConfigChange
		want *kerr.Error
	}{
		{"read-only", "", ConfigChange{Set: map[string]string{"replica.fetch.wait.max.ms": "10"}}, kerr.InvalidRequest},
		{"unknown", "", ConfigChange{Set: map[string]string{"no.such.config": "1"}}, kerr.InvalidRequest},
		{"bad value", "", ConfigChange{Set: map[string]string{"num.replica.fetchers": "0"}}, kerr.InvalidRequest},
		{"too many fetchers", "", ConfigChange{Set: map[string]string{"num.replica.fetchers": "65"}}, kerr.InvalidRequest},
		{"unsupported value", "", ConfigChange{Set: map[string]string{"log.cleanup.policy": "compact"}}, kerr.InvalidRequest},
		{"unclean per broker", "1", ConfigChange{Set: map[string]string{"unclean.leader.election.enable": "true"}}, kerr.InvalidRequest},
		{"bad resource", "x", ConfigChange{Set: map[string]string{"num.replica.fetchers": "2"}}, kerr.InvalidRequest},
		{"unregistered broker", "7", ConfigChange{Set: map[string]string{"num.replica.fetchers": "2"}}, kerr.BrokerIDNotRegistered},
		{"delete read-only", "", ConfigChange{Delete: []string{"broker.id"}}, kerr.InvalidRequest},
	} {
		if err := c.ChangeBrokerConfig(tc.res, tc.ch); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := c.ChangeBrokerConfig("", ConfigChange{Set: map[string]string{"num.replica.fetchers": "4"}, ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	if got := c.BrokerConfigs(""); len(got) != 0 {
		t.Fatalf("validate only changed the defaults: %v", got)
	}
	if err := c.ChangeBrokerConfig("", ConfigChange{Set: map[string]string{"num.replica.fetchers": " 4", "log.retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeBrokerConfig("2", ConfigChange{Set: map[string]string{"num.replica.fetchers": "2"}}); err != nil {
		t.Fatal(err)
	}
	if got := c.EffectiveBrokerConfigs(2); got["num.replica.fetchers"] != "2" || got["log.retention.ms"] != "1000" {
		t.Errorf("broker 2's effective configs %v", got)
	}
	if got := c.EffectiveBrokerConfigs(1); got["num.replica.fetchers"] != "4" {
		t.Errorf("broker 1's effective configs %v", got)
	}
	// Legacy AlterConfigs replaces the whole set.
	if err := c.ChangeBrokerConfig("", ConfigChange{Set: map[string]string{"num.replica.fetchers": "3"}, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if got := c.BrokerConfigs(""); !maps.Equal(got, map[string]string{"num.replica.fetchers": "3"}) {
		t.Errorf("after a replace the defaults are %v", got)
	}
	for _, id := range []int32{1, 2} {
		if err := c.Sync(syncCtx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	lastConfigs := func(u *updates) map[string]string {
		var last map[string]string
		for _, up := range u.all() {
			if up.BrokerConfigs != nil {
				last = up.BrokerConfigs.Configs
			}
		}
		return last
	}
	if got := lastConfigs(&r1); !maps.Equal(got, map[string]string{"num.replica.fetchers": "3"}) {
		t.Errorf("broker 1 was last told %v", got)
	}
	if got := lastConfigs(&r2); !maps.Equal(got, map[string]string{"num.replica.fetchers": "2"}) {
		t.Errorf("broker 2 was last told %v", got)
	}
	// A new subscription starts with the broker's dynamic configs.
	var r2b updates
	defer c.Subscribe(2, r2b.fn)()
	if err := c.Sync(syncCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	if got := r2b.all(); len(got) == 0 || got[0].BrokerConfigs == nil || got[0].BrokerConfigs.Configs["num.replica.fetchers"] != "2" {
		t.Errorf("a new subscription of broker 2 began with %+v", got)
	}
}

// Enabling unclean.leader.election.enable as the dynamic cluster default elects offline
// partitions at once, except those of topics whose own config disables it.
func TestDynamicUncleanDefaultElects(t *testing.T) {
	c, _ := newTestController(t, 2, Config{})
	mustCreate(t, c, "u", 1, 2, nil) // [1 2]
	mustCreate(t, c, "off", 1, 2, map[string]string{ConfigUncleanLeaderElectionEnable: "false"})
	c.BrokerDown(2)
	c.BrokerDown(1) // both offline, ISR kept as the last member
	c.BrokerUp(2)   // not in the ISRs: no clean election
	if st := mustPart(t, c, "u", 0); st.Leader != NoLeader {
		t.Fatalf("u-0 %v: want offline", st)
	}
	if err := c.ChangeBrokerConfig("", ConfigChange{Set: map[string]string{ConfigUncleanLeaderElectionEnable: "true"}}); err != nil {
		t.Fatal(err)
	}
	if st := mustPart(t, c, "u", 0); st.Leader != 2 || !slices.Equal(st.ISR, []int32{2}) {
		t.Errorf("u-0 after enabling unclean election: %v, want leader 2", st)
	}
	if st := mustPart(t, c, "off", 0); st.Leader != NoLeader {
		t.Errorf("off-0 (topic override false) got leader %d", st.Leader)
	}
	if s := c.Stats(); s.UncleanElections != 1 {
		t.Errorf("unclean elections %d, want 1", s.UncleanElections)
	}
}

func TestBalanceLeaders(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 6, 3, nil) // preferred leaders 1,2,3,1,2,3
	c.BrokerDown(1)
	c.BrokerUp(1) // broker 1 leads nothing now; it is not in the ISRs either
	for _, st := range mustPartitions(t, c, "t") {
		if st.Leader == 1 {
			t.Fatalf("broker 1 leads %v after a restart", st)
		}
	}
	if moved := c.BalanceLeaders(10); len(moved) != 0 {
		t.Errorf("moved %v with the preferred replica out of the ISR", moved)
	}
	for _, st := range mustPartitions(t, c, "t") {
		if !slices.Contains(st.ISR, 1) {
			if _, err := alterISR(c, "t", st.Partition, st.Leader, st.LeaderEpoch, st.PartitionEpoch, append(slices.Clone(st.ISR), 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Broker 1 prefers 2 partitions and leads none: 100% > 50%, but not > 100%.
	if moved := c.BalanceLeaders(100); len(moved) != 0 {
		t.Errorf("percentage 100 moved %v", moved)
	}
	moved := c.BalanceLeaders(50)
	if want := []TopicPartition{{"t", 0}, {"t", 3}}; !slices.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	for _, st := range mustPartitions(t, c, "t") {
		if st.Leader != st.Replicas[0] {
			t.Errorf("%v: not led by its preferred replica", st)
		}
	}
	if moved := c.BalanceLeaders(0); len(moved) != 0 {
		t.Errorf("a balanced cluster moved %v", moved)
	}
	checkInvariants(t, c)
}

// TestReopenKeepsAdminChanges: deletions, added partitions, topic configs and dynamic broker
// configs survive a restart of the controller, from the log and from a compacted snapshot.
func TestReopenKeepsAdminChanges(t *testing.T) {
	fs := vfs.NewMemFS(nil)
	open := func() *Controller {
		t.Helper()
		c, _, err := Open(Config{Dir: "/meta", FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id})
	}
	mustCreate(t, c, "a", 1, 3, nil)
	mustCreate(t, c, "b", 2, 2, nil)
	mustCreate(t, c, "c", 1, 1, nil)
	if err := c.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePartitions("a", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterTopicConfig("a", map[string]string{"retention.ms": "99"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeBrokerConfig("", ConfigChange{Set: map[string]string{"num.replica.fetchers": "3"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangeBrokerConfig("2", ConfigChange{Set: map[string]string{"log.retention.bytes": "100"}}); err != nil {
		t.Fatal(err)
	}
	idA, _ := c.TopicID("a")
	idC, _ := c.TopicID("c")
	if err := c.DeleteTopic("c"); err != nil {
		t.Fatal(err)
	}
	check := func(c *Controller, how string) {
		t.Helper()
		if got := c.Topics(); !slices.Equal(got, []string{"a"}) {
			t.Errorf("%s: topics %v, want [a]", how, got)
		}
		ps, _ := c.Partitions("a")
		if len(ps) != 3 {
			t.Errorf("%s: a has %d partitions, want 3", how, len(ps))
		}
		for _, st := range ps {
			if len(st.Replicas) != 3 || len(st.ISR) == 0 {
				t.Errorf("%s: %v", how, st)
			}
		}
		if cfg := c.TopicConfig("a"); cfg["retention.ms"] != "99" {
			t.Errorf("%s: a's configs %v", how, cfg)
		}
		if got := c.BrokerConfigs(""); got["num.replica.fetchers"] != "3" {
			t.Errorf("%s: cluster defaults %v", how, got)
		}
		if got := c.BrokerConfigs("2"); got["log.retention.bytes"] != "100" {
			t.Errorf("%s: broker 2's configs %v", how, got)
		}
		if id, _ := c.TopicID("a"); id != idA {
			t.Errorf("%s: a's id %v, want %v", how, id, idA)
		}
		// A topic created now gets an id never used before.
		mustCreate(t, c, "c", 1, 1, nil)
		if id, _ := c.TopicID("c"); id == idC || id == idA {
			t.Errorf("%s: re-created c got id %v (a %v, old c %v)", how, id, idA, idC)
		}
		if err := c.DeleteTopic("c"); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	c = open()
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id})
	}
	check(c, "reopened from the log")
	c.mu.Lock()
	err := c.mu.store.compact(c.mu.durable.records())
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = open()
	defer c.Close()
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id})
	}
	check(c, "reopened from a snapshot")
}
