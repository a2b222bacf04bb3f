package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeClock is an injectable ns clock.
type fakeClock struct{ ns atomic.Int64 }

func (f *fakeClock) Now() int64              { return f.ns.Load() }
func (f *fakeClock) Advance(d time.Duration) { f.ns.Add(int64(d)) }

// newTestController returns a controller with brokers 1..n registered and a
// fake clock.
func newTestController(t *testing.T, n int, cfg Config) (*Controller, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	clk.ns.Store(1_000_000_000)
	cfg.Now = clk.Now
	c := New(cfg)
	t.Cleanup(c.Close)
	for id := int32(1); id <= int32(n); id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	return c, clk
}

func mustCreate(t *testing.T, c *Controller, name string, parts int32, rf int16, cfg map[string]string) []PartitionState {
	t.Helper()
	sts, err := c.CreateTopic(name, parts, rf, cfg)
	if err != nil {
		t.Fatalf("CreateTopic(%q): %v", name, err)
	}
	return sts
}

func mustPart(t *testing.T, c *Controller, topic string, p int32) PartitionState {
	t.Helper()
	st, ok := c.Partition(topic, p)
	if !ok {
		t.Fatalf("partition %s-%d missing", topic, p)
	}
	return st
}

// checkInvariants verifies the ISR invariants of every partition.
func checkInvariants(t *testing.T, c *Controller) {
	t.Helper()
	alive := map[int32]bool{}
	for _, b := range c.Brokers() {
		alive[b.ID] = b.Alive
	}
	for _, name := range c.Topics() {
		sts, _ := c.Partitions(name)
		for _, st := range sts {
			if len(st.ISR) == 0 {
				t.Errorf("%v: empty ISR", st)
			}
			for _, r := range st.ISR {
				if !slices.Contains(st.Replicas, r) {
					t.Errorf("%v: ISR member %d not a replica", st, r)
				}
			}
			if st.Leader != NoLeader {
				if !slices.Contains(st.ISR, st.Leader) {
					t.Errorf("%v: leader not in ISR", st)
				}
				for _, r := range st.ISR {
					if !alive[r] {
						t.Errorf("%v: fenced broker %d in the ISR of a led partition", st, r)
					}
				}
			}
		}
	}
}

func TestPlacementBalance(t *testing.T) {
	for _, tc := range []struct {
		brokers, parts int
		rf             int16
	}{
		{3, 6, 3}, {3, 6, 1}, {3, 6, 2}, {5, 10, 3}, {4, 7, 2}, {1, 3, 1}, {6, 1000, 3},
	} {
		t.Run(fmt.Sprintf("b%d_p%d_rf%d", tc.brokers, tc.parts, tc.rf), func(t *testing.T) {
			c, _ := newTestController(t, tc.brokers, Config{})
			sts := mustCreate(t, c, "t", int32(tc.parts), tc.rf, nil)
			leads := map[int32]int{}
			hosts := map[int32]int{}
			for p, st := range sts {
				if st.Partition != int32(p) || st.Topic != "t" {
					t.Fatalf("state %d names %s-%d", p, st.Topic, st.Partition)
				}
				if len(st.Replicas) != int(tc.rf) || !slices.Equal(st.ISR, st.Replicas) || st.Leader != st.Replicas[0] {
					t.Fatalf("bad initial state %v", st)
				}
				if st.LeaderEpoch != 0 || st.PartitionEpoch != 0 {
					t.Fatalf("initial epochs %v", st)
				}
				seen := map[int32]bool{}
				for _, r := range st.Replicas {
					if seen[r] {
						t.Fatalf("replica %d twice in %v", r, st)
					}
					seen[r] = true
					hosts[r]++
				}
				leads[st.Leader]++
			}
			lo, hi := tc.parts/tc.brokers, (tc.parts+tc.brokers-1)/tc.brokers
			for id := int32(1); id <= int32(tc.brokers); id++ {
				if leads[id] < lo || leads[id] > hi {
					t.Errorf("broker %d leads %d partitions, want %d..%d (%v)", id, leads[id], lo, hi, leads)
				}
				rlo, rhi := lo*int(tc.rf), hi*int(tc.rf)
				if hosts[id] < rlo || hosts[id] > rhi {
					t.Errorf("broker %d hosts %d replicas, want %d..%d", id, hosts[id], rlo, rhi)
				}
			}
			checkInvariants(t, c)
		})
	}
}

func TestPlacementExactAndTopicStart(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	a := mustCreate(t, c, "a", 6, 3, nil)
	want := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}
	for p, st := range a {
		if !slices.Equal(st.Replicas, want[p]) {
			t.Errorf("a-%d replicas %v, want %v", p, st.Replicas, want[p])
		}
	}
	b := mustCreate(t, c, "b", 1, 2, nil)
	if b[0].Leader != 2 {
		t.Errorf("second topic starts at broker %d, want 2 (per-topic start)", b[0].Leader)
	}
	// Fenced brokers get no replicas.
	c.BrokerDown(3)
	d := mustCreate(t, c, "d", 4, 2, nil)
	for _, st := range d {
		if slices.Contains(st.Replicas, 3) {
			t.Errorf("fenced broker 3 placed: %v", st)
		}
	}
	if got := a[1].String(); got != "Topic: a\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1\tLeaderEpoch: 0\tPartitionEpoch: 0" {
		t.Errorf("String() = %q", got)
	}
}

func TestCreateTopicValidation(t *testing.T) {
	long := strings.Repeat("x", 250)
	for _, tc := range []struct {
		name  string
		topic string
		parts int32
		rf    int16
		cfg   map[string]string
		want  *kerr.Error
		field string // substring the message must contain
	}{
		{"empty name", "", 1, 1, nil, kerr.InvalidTopicException, "empty"},
		{"dot", ".", 1, 1, nil, kerr.InvalidTopicException, `"."`},
		{"dotdot", "..", 1, 1, nil, kerr.InvalidTopicException, `".."`},
		{"space", "a b", 1, 1, nil, kerr.InvalidTopicException, "legal characters"},
		{"slash", "a/b", 1, 1, nil, kerr.InvalidTopicException, "legal characters"},
		{"unicode", "tópico", 1, 1, nil, kerr.InvalidTopicException, "legal characters"},
		{"too long", long, 1, 1, nil, kerr.InvalidTopicException, "250 characters"},
		{"exists", "taken", 1, 1, nil, kerr.TopicAlreadyExists, "already exists"},
		{"collides", "my_topic", 1, 1, nil, kerr.InvalidTopicException, `collides with existing topic "my.topic"`},
		{"zero partitions", "t", 0, 1, nil, kerr.InvalidPartitions, "number of partitions 0"},
		{"negative partitions", "t", -1, 1, nil, kerr.InvalidPartitions, "number of partitions -1"},
		{"too many partitions", "t", MaxPartitions + 1, 1, nil, kerr.InvalidPartitions, "number of partitions"},
		{"zero rf", "t", 1, 0, nil, kerr.InvalidReplicationFactor, "replication factor 0"},
		{"rf above brokers", "t", 1, 4, nil, kerr.InvalidReplicationFactor, "replication factor 4 must be in [1, 3 alive brokers]"},
		{"unknown config", "t", 1, 3, map[string]string{"retention.mss": "1"}, kerr.InvalidConfig, `"retention.mss"`},
		{"min isr zero", "t", 1, 3, map[string]string{"min.insync.replicas": "0"}, kerr.InvalidConfig, "min.insync.replicas"},
		{"min isr above rf", "t", 1, 2, map[string]string{"min.insync.replicas": "3"}, kerr.InvalidConfig, "replication factor 2"},
		{"min isr not int", "t", 1, 3, map[string]string{"min.insync.replicas": "two"}, kerr.InvalidConfig, "min.insync.replicas"},
		{"unclean not bool", "t", 1, 3, map[string]string{"unclean.leader.election.enable": "maybe"}, kerr.InvalidConfig, "true or false"},
		{"compact", "t", 1, 3, map[string]string{"cleanup.policy": "compact"}, kerr.InvalidConfig, "cleanup.policy"},
		{"segment too small", "t", 1, 3, map[string]string{"segment.bytes": "10"}, kerr.InvalidConfig, "segment.bytes"},
		{"segment overflow", "t", 1, 3, map[string]string{"segment.bytes": "4294967296"}, kerr.InvalidConfig, "segment.bytes"},
		{"retention below -1", "t", 1, 3, map[string]string{"retention.ms": "-2"}, kerr.InvalidConfig, "retention.ms"},
		{"flush.messages zero", "t", 1, 3, map[string]string{"flush.messages": "0"}, kerr.InvalidConfig, "flush.messages"},
		{"max.message.bytes negative", "t", 1, 3, map[string]string{"max.message.bytes": "-1"}, kerr.InvalidConfig, "max.message.bytes"},
		{"ok", "t", 3, 3, map[string]string{
			"min.insync.replicas": " 2", "unclean.leader.election.enable": "TRUE", "retention.ms": "-1",
			"retention.bytes": "1048576", "segment.bytes": "1048576", "flush.messages": "1", "flush.ms": "0",
			"cleanup.policy": "delete", "max.message.bytes": "1048588",
		}, nil, ""},
		{"max length ok", strings.Repeat("y", 249), 1, 1, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestController(t, 3, Config{})
			mustCreate(t, c, "taken", 1, 1, nil)
			mustCreate(t, c, "my.topic", 1, 1, nil)
			before := c.Topics()
			verr := c.ValidateCreateTopic(tc.topic, tc.parts, tc.rf, tc.cfg)
			sts, err := c.CreateTopic(tc.topic, tc.parts, tc.rf, tc.cfg)
			if (verr == nil) != (err == nil) {
				t.Fatalf("ValidateCreateTopic = %v but CreateTopic = %v", verr, err)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if len(sts) != int(tc.parts) {
					t.Fatalf("%d states, want %d", len(sts), tc.parts)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want.Message)
			}
			var ke *kerr.Error
			if !errors.As(err, &ke) || ke != tc.want {
				t.Fatalf("errors.As gives %v, want %v", ke, tc.want)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
			if !slices.Equal(c.Topics(), before) {
				t.Errorf("failed create changed topics: %v", c.Topics())
			}
		})
	}
}

func TestTopicConfigNormalizedCopy(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, map[string]string{"unclean.leader.election.enable": " True ", "min.insync.replicas": "2"})
	cfg := c.TopicConfig("t")
	if cfg["unclean.leader.election.enable"] != "true" || cfg["min.insync.replicas"] != "2" || len(cfg) != 2 {
		t.Fatalf("TopicConfig = %v", cfg)
	}
	cfg["min.insync.replicas"] = "3"
	if c.TopicConfig("t")["min.insync.replicas"] != "2" {
		t.Fatal("TopicConfig returned shared map")
	}
	if c.TopicConfig("nope") != nil {
		t.Fatal("config of unknown topic")
	}
	st := mustPart(t, c, "t", 0)
	st.ISR[0] = 99
	if mustPart(t, c, "t", 0).ISR[0] == 99 {
		t.Fatal("Partition returned shared slice")
	}
}

// fakeOffsets is an Offsets that also calls back into the controller, which
// would deadlock if it were called under the controller lock.
type fakeOffsets struct {
	c     *Controller
	mu    sync.Mutex
	offs  map[int32][2]int64 // broker -> leo, hw (one partition tests)
	calls int
}

func (f *fakeOffsets) ReplicaOffsets(broker int32, topic string, p int32) (int64, int64, bool) {
	f.c.Brokers() // must not deadlock
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	o, ok := f.offs[broker]
	return o[0], o[1], ok
}

func TestElections(t *testing.T) {
	type step struct {
		op     string // down, up, alter
		broker int32
		isr    []int32 // alter: proposed ISR
		// expected partition state after the step
		leader         int32
		isrAfter       []int32
		leaderEpoch    int32
		partitionEpoch int32
	}
	for _, tc := range []struct {
		name        string
		cluster     bool              // cluster-wide unclean.leader.election.enable
		topicCfg    map[string]string // topic overrides
		offs        map[int32][2]int64
		steps       []step
		elections   int64
		unclean     int64
		lost        int64
		offline     int
		isrChanges  int64
		isrShrinks  int64 // by the controller itself, not by AlterPartition
		fencedAtEnd int
	}{
		{
			name: "clean election picks next ISR member in replica order",
			steps: []step{
				{op: "down", broker: 1, leader: 2, isrAfter: []int32{2, 3}, leaderEpoch: 1, partitionEpoch: 1},
				{op: "down", broker: 2, leader: 3, isrAfter: []int32{3}, leaderEpoch: 2, partitionEpoch: 2},
			},
			elections: 2, isrShrinks: 2, fencedAtEnd: 2,
		},
		{
			name: "follower down shrinks ISR without leader change",
			steps: []step{
				{op: "down", broker: 3, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 2, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 2},
				{op: "up", broker: 2, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 2},
			},
			isrChanges: 2, isrShrinks: 2, fencedAtEnd: 1,
		},
		{
			name: "skips alive replica outside ISR; then offline keeping last ISR member",
			steps: []step{
				{op: "alter", broker: 1, isr: []int32{1, 3}, leader: 1, isrAfter: []int32{1, 3}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 1, leader: 3, isrAfter: []int32{3}, leaderEpoch: 1, partitionEpoch: 2},
				{op: "down", broker: 3, leader: NoLeader, isrAfter: []int32{3}, leaderEpoch: 2, partitionEpoch: 3},
				// broker 1 is back but out of the ISR: no unclean election.
				{op: "up", broker: 1, leader: NoLeader, isrAfter: []int32{3}, leaderEpoch: 2, partitionEpoch: 3},
				// the last ISR member comes back: clean election.
				{op: "up", broker: 3, leader: 3, isrAfter: []int32{3}, leaderEpoch: 3, partitionEpoch: 4},
			},
			elections: 2, isrChanges: 1, isrShrinks: 1, fencedAtEnd: 0,
		},
		{
			name:    "unclean by cluster config: out-of-ISR leader, lost offsets counted",
			cluster: true,
			offs:    map[int32][2]int64{1: {120, 100}, 2: {70, 60}, 3: {95, 90}},
			steps: []step{
				{op: "alter", broker: 1, isr: []int32{1}, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 1, leader: 2, isrAfter: []int32{2}, leaderEpoch: 1, partitionEpoch: 2},
			},
			elections: 1, unclean: 1, lost: 30, isrChanges: 1, isrShrinks: 1, fencedAtEnd: 1,
		},
		{
			name:     "unclean by topic override",
			topicCfg: map[string]string{"unclean.leader.election.enable": "true"},
			offs:     map[int32][2]int64{1: {120, 100}, 2: {110, 90}},
			steps: []step{
				{op: "alter", broker: 1, isr: []int32{1}, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 1, leader: 2, isrAfter: []int32{2}, leaderEpoch: 1, partitionEpoch: 2},
			},
			elections: 1, unclean: 1, lost: 0, isrChanges: 1, isrShrinks: 1, fencedAtEnd: 1,
		},
		{
			name:     "topic override false beats cluster true: offline",
			cluster:  true,
			topicCfg: map[string]string{"unclean.leader.election.enable": "false"},
			steps: []step{
				{op: "alter", broker: 1, isr: []int32{1}, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 1, leader: NoLeader, isrAfter: []int32{1}, leaderEpoch: 1, partitionEpoch: 2},
			},
			offline: 1, isrChanges: 1, fencedAtEnd: 1,
		},
		{
			name:    "unclean on BrokerUp of an out-of-ISR replica",
			cluster: true,
			offs:    map[int32][2]int64{1: {50, 50}, 3: {20, 10}},
			steps: []step{
				{op: "down", broker: 3, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 2, leader: 1, isrAfter: []int32{1}, leaderEpoch: 0, partitionEpoch: 2},
				{op: "down", broker: 1, leader: NoLeader, isrAfter: []int32{1}, leaderEpoch: 1, partitionEpoch: 3},
				{op: "up", broker: 3, leader: 3, isrAfter: []int32{3}, leaderEpoch: 2, partitionEpoch: 4},
			},
			elections: 1, unclean: 1, lost: 30, offline: 0, isrChanges: 2, isrShrinks: 3, fencedAtEnd: 2,
		},
		{
			name: "down of a fenced or unknown broker changes nothing",
			steps: []step{
				{op: "down", broker: 3, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 3, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "down", broker: 42, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
				{op: "up", broker: 42, leader: 1, isrAfter: []int32{1, 2}, leaderEpoch: 0, partitionEpoch: 1},
			},
			isrChanges: 1, isrShrinks: 1, fencedAtEnd: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestController(t, 3, Config{UncleanLeaderElectionEnable: tc.cluster})
			if tc.offs != nil {
				c.SetOffsets(&fakeOffsets{c: c, offs: tc.offs})
			}
			mustCreate(t, c, "t", 1, 3, tc.topicCfg)
			for i, s := range tc.steps {
				switch s.op {
				case "down":
					c.BrokerDown(s.broker)
				case "up":
					c.BrokerUp(s.broker)
				case "alter":
					cur := mustPart(t, c, "t", 0)
					if _, err := alterISR(c, "t", 0, s.broker, cur.LeaderEpoch, cur.PartitionEpoch, s.isr); err != nil {
						t.Fatalf("step %d: AlterPartition: %v", i, err)
					}
				}
				st := mustPart(t, c, "t", 0)
				if st.Leader != s.leader || !slices.Equal(st.ISR, s.isrAfter) ||
					st.LeaderEpoch != s.leaderEpoch || st.PartitionEpoch != s.partitionEpoch {
					t.Fatalf("step %d (%s %d): got %v, want leader %d isr %v epochs %d/%d",
						i, s.op, s.broker, st, s.leader, s.isrAfter, s.leaderEpoch, s.partitionEpoch)
				}
				checkInvariants(t, c)
			}
			got := c.Stats()
			want := Stats{Elections: tc.elections, UncleanElections: tc.unclean, LostOffsets: tc.lost,
				OfflinePartitions: tc.offline, ISRChanges: tc.isrChanges, ISRShrinks: tc.isrShrinks,
				FencedBrokers: tc.fencedAtEnd, ActiveBrokers: 3 - tc.fencedAtEnd}
			if got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
		})
	}
}

func TestOfflineAcrossTopicsAndStats(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "a", 6, 1, nil)
	mustCreate(t, c, "b", 3, 2, nil)
	c.BrokerDown(2)
	// rf 1: the two partitions on broker 2 go offline; rf 2: they fail over.
	sts, _ := c.Partitions("a")
	offline := 0
	for _, st := range sts {
		if st.Replicas[0] == 2 {
			if st.Leader != NoLeader || !slices.Equal(st.ISR, []int32{2}) || st.LeaderEpoch != 1 {
				t.Errorf("rf1 partition on fenced broker: %v", st)
			}
			offline++
		} else if st.LeaderEpoch != 0 || st.PartitionEpoch != 0 {
			t.Errorf("untouched partition changed: %v", st)
		}
	}
	if offline != 2 || c.Stats().OfflinePartitions != 2 {
		t.Fatalf("offline %d, stats %+v", offline, c.Stats())
	}
	// b (start index 1): b-0 [2 3] fails over to 3, b-2 [1 2] shrinks.
	if st := mustPart(t, c, "b", 0); st.Leader != 3 || !slices.Equal(st.ISR, []int32{3}) {
		t.Errorf("b-0 %v", st)
	}
	if st := mustPart(t, c, "b", 2); st.Leader != 1 || !slices.Equal(st.ISR, []int32{1}) || st.LeaderEpoch != 0 {
		t.Errorf("b-2 %v", st)
	}
	if s := c.Stats(); s.Elections != 1 || s.ISRChanges != 1 {
		t.Errorf("stats after down %+v", s)
	}
	c.BrokerUp(2)
	checkInvariants(t, c)
	if s := c.Stats(); s.OfflinePartitions != 0 || s.Elections != 3 || s.UncleanElections != 0 {
		t.Fatalf("stats after up %+v", s)
	}
	if st := mustPart(t, c, "a", 4); st.Leader != 2 || st.LeaderEpoch != 2 || st.PartitionEpoch != 2 {
		t.Errorf("a-4 after up %v", st)
	}
}

func TestAlterPartition(t *testing.T) {
	for _, tc := range []struct {
		name           string
		leader         int32
		leaderEpoch    int32 // relative to current: cur + delta
		partitionEpoch int32
		isr            []int32
		want           []*kerr.Error
		msg            string
	}{
		{"wrong leader", 2, 0, 0, []int32{2, 3}, []*kerr.Error{kerr.NotLeaderForPartition}, "not the leader"},
		{"stale leader epoch", 1, -1, 0, []int32{1, 2}, []*kerr.Error{kerr.FencedLeaderEpoch}, "leader epoch 1 is not the current 2"},
		{"future leader epoch", 1, +1, 0, []int32{1, 2}, []*kerr.Error{kerr.FencedLeaderEpoch}, "leader epoch 3 is not the current 2"},
		{"stale partition epoch", 1, 0, -1, []int32{1, 2}, []*kerr.Error{kerr.InvalidUpdateVersion}, "partition epoch"},
		{"leader missing from ISR", 1, 0, 0, []int32{2}, []*kerr.Error{kerr.InvalidRequest}, "lacks the leader"},
		{"non-replica", 1, 0, 0, []int32{1, 4}, []*kerr.Error{kerr.InvalidRequest}, "broker 4, not a replica"},
		{"duplicate", 1, 0, 0, []int32{1, 2, 1}, []*kerr.Error{kerr.InvalidRequest}, "twice"},
		{"fenced broker", 1, 0, 0, []int32{1, 3}, []*kerr.Error{kerr.InvalidRequest, kerr.IneligibleReplica}, "fenced broker 3"},
		{"shrink ok", 1, 0, 0, []int32{1}, nil, ""},
		{"no-op ok", 1, 0, 0, []int32{1, 2}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestController(t, 4, Config{})
			// Replicas [1 2 3]; bring leader epoch to 1 by moving and moving back.
			mustCreate(t, c, "t", 1, 3, nil)
			if _, err := c.TransferLeader("t", 0, 2); err != nil {
				t.Fatal(err)
			}
			c.BrokerDown(3) // ISR [1 2]? leader 2: ISR [2 1] order kept
			if _, err := c.ElectLeader("t", 0, false); err != nil {
				t.Fatal(err)
			}
			cur := mustPart(t, c, "t", 0)
			if cur.Leader != 1 || cur.LeaderEpoch != 2 {
				t.Fatalf("setup state %v", cur)
			}
			before := c.Stats()
			st, err := alterISR(c, "t", 0, tc.leader, cur.LeaderEpoch+tc.leaderEpoch, cur.PartitionEpoch+tc.partitionEpoch, tc.isr)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("AlterPartition: %v", err)
				}
				wantEpoch := cur.PartitionEpoch + 1
				if slices.Equal(tc.isr, cur.ISR) {
					wantEpoch = cur.PartitionEpoch
				}
				if !slices.Equal(st.ISR, tc.isr) || st.PartitionEpoch != wantEpoch || st.LeaderEpoch != cur.LeaderEpoch {
					t.Fatalf("after AlterPartition %v (was %v)", st, cur)
				}
				if got := mustPart(t, c, "t", 0); !slices.Equal(got.ISR, tc.isr) || got.PartitionEpoch != wantEpoch {
					t.Fatalf("stored state %v", got)
				}
				return
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v is not %s", err, w.Message)
				}
			}
			var ke *kerr.Error
			if errors.As(err, &ke); ke != tc.want[0] {
				t.Errorf("error code %v, want %v", ke, tc.want[0])
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if got := mustPart(t, c, "t", 0); !slices.Equal(got.ISR, cur.ISR) || got.PartitionEpoch != cur.PartitionEpoch {
				t.Errorf("rejected AlterPartition changed state: %v", got)
			}
			if st.PartitionEpoch != cur.PartitionEpoch {
				t.Errorf("returned state %v, want the current one", st)
			}
			if c.Stats() != before {
				t.Errorf("rejected AlterPartition changed stats")
			}
		})
	}
	c, _ := newTestController(t, 1, Config{})
	if _, err := alterISR(c, "nope", 0, 1, 0, 0, []int32{1}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	mustCreate(t, c, "t", 1, 1, nil)
	if _, err := alterISR(c, "t", 1, 1, 0, 0, []int32{1}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
}

func TestElectLeaderAndTransfer(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, nil)
	if _, err := c.ElectLeader("t", 0, false); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred already leads: %v", err)
	}
	if _, err := c.ElectLeader("t", 0, true); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean with a leader: %v", err)
	}
	if _, err := c.TransferLeader("t", 0, 1); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("transfer to leader: %v", err)
	}
	if _, err := c.TransferLeader("t", 0, 7); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("transfer to non-replica: %v", err)
	}
	st, err := c.TransferLeader("t", 0, 3)
	if err != nil || st.Leader != 3 || st.LeaderEpoch != 1 || st.PartitionEpoch != 1 || !slices.Equal(st.ISR, []int32{1, 2, 3}) {
		t.Fatalf("transfer: %v %v", st, err)
	}
	st, err = c.ElectLeader("t", 0, false)
	if err != nil || st.Leader != 1 || st.LeaderEpoch != 2 {
		t.Fatalf("preferred: %v %v", st, err)
	}
	// Preferred replica out of the ISR.
	if _, err := alterISR(c, "t", 0, 1, 2, st.PartitionEpoch, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TransferLeader("t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := alterISR(c, "t", 0, 2, 3, mustPart(t, c, "t", 0).PartitionEpoch, []int32{2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ElectLeader("t", 0, false); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred out of ISR: %v", err)
	}
	// Offline; explicit unclean election overrides the disabled config.
	offs := &fakeOffsets{c: c, offs: map[int32][2]int64{2: {40, 40}, 1: {25, 20}}}
	c.SetOffsets(offs)
	c.BrokerDown(2)
	if st := mustPart(t, c, "t", 0); st.Leader != NoLeader || !slices.Equal(st.ISR, []int32{2}) {
		t.Fatalf("expected offline, got %v", st)
	}
	st, err = c.ElectLeader("t", 0, true)
	if err != nil || st.Leader != 1 || !slices.Equal(st.ISR, []int32{1}) {
		t.Fatalf("unclean elect: %v %v", st, err)
	}
	if s := c.Stats(); s.UncleanElections != 1 || s.LostOffsets != 15 {
		t.Fatalf("stats %+v", s)
	}
	c.BrokerDown(1)
	c.BrokerDown(3)
	if _, err := c.ElectLeader("t", 0, true); !errors.Is(err, kerr.EligibleLeadersNotAvailable) {
		t.Fatalf("nobody alive: %v", err)
	}
	if _, err := c.ElectLeader("t", 5, true); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown: %v", err)
	}
	checkInvariants(t, c)
}

func TestSessionExpiry(t *testing.T) {
	c, clk := newTestController(t, 3, Config{BrokerSessionTimeoutMs: 9000})
	mustCreate(t, c, "t", 3, 3, nil)
	alive := func() []int32 {
		var ids []int32
		for _, b := range c.Brokers() {
			if b.Alive {
				ids = append(ids, b.ID)
			}
		}
		return ids
	}
	clk.Advance(5 * time.Second)
	c.Heartbeat(2, -1)
	c.Heartbeat(3, -1)
	clk.Advance(4 * time.Second) // broker 1: exactly 9000 ms since its heartbeat
	c.CheckSessions()
	if got := alive(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("fenced at exactly the timeout: alive %v", got)
	}
	clk.Advance(time.Nanosecond)
	c.CheckSessions()
	if got := alive(); !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("after timeout+1ns: alive %v", got)
	}
	if st := mustPart(t, c, "t", 0); st.Leader != 2 || st.LeaderEpoch != 1 {
		t.Fatalf("partition 0 after fencing its leader: %v", st)
	}
	// A session-fenced broker that heartbeats again is unfenced.
	c.Heartbeat(1, -1)
	if got := alive(); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("heartbeat did not unfence: %v", got)
	}
	// A broker fenced by BrokerDown stays fenced on heartbeats.
	c.BrokerDown(3)
	c.Heartbeat(3, -1)
	if got := alive(); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("heartbeat revived a killed broker: %v", got)
	}
	// RegisterBroker (restart) does revive it.
	c.RegisterBroker(Registration{ID: 3, Host: "127.0.0.1", Port: 19093})
	if b, _ := c.Broker(3); !b.Alive || b.Port != 19093 {
		t.Fatalf("re-register: %+v", b)
	}
	// All three expire together: stalest first, partition ends offline with
	// the last fenced broker as its ISR.
	clk.Advance(time.Second)
	c.Heartbeat(3, -1)
	clk.Advance(time.Second)
	c.Heartbeat(1, -1)
	clk.Advance(10 * time.Second)
	c.Heartbeat(42, -1) // unknown: ignored
	c.CheckSessions()
	if got := alive(); len(got) != 0 {
		t.Fatalf("alive after all expired: %v", got)
	}
	for _, st := range mustPartitions(t, c, "t") {
		if st.Leader != NoLeader || len(st.ISR) != 1 {
			t.Errorf("after all fenced: %v", st)
		}
	}
	checkInvariants(t, c)
}

func mustPartitions(t *testing.T, c *Controller, topic string) []PartitionState {
	t.Helper()
	sts, ok := c.Partitions(topic)
	if !ok {
		t.Fatalf("topic %s missing", topic)
	}
	return sts
}

func TestRunTicksCheckSessions(t *testing.T) {
	c, clk := newTestController(t, 2, Config{})
	mustCreate(t, c, "t", 1, 2, nil)
	changed := make(chan PartitionState, 16)
	cancelSub := c.Subscribe(2, onPartition(func(st PartitionState) { changed <- st }))
	defer cancelSub()
	<-changed // initial state
	clk.Advance(10 * time.Second)
	c.Heartbeat(2, -1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, time.Millisecond) }()
	select {
	case st := <-changed:
		if st.Leader != 2 {
			t.Fatalf("change %v, want broker 2 to lead", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not fence broker 1")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestAlterTopicConfig(t *testing.T) {
	c, _ := newTestController(t, 2, Config{})
	c.SetOffsets(&fakeOffsets{c: c, offs: map[int32][2]int64{1: {9, 9}, 2: {4, 4}}})
	mustCreate(t, c, "t", 1, 2, map[string]string{"retention.ms": "1000"})
	for _, tc := range []struct {
		name string
		set  map[string]string
		del  []string
		want error
	}{
		{"unknown topic", nil, nil, kerr.UnknownTopicOrPartition},
		{"bad value", map[string]string{"min.insync.replicas": "3"}, nil, kerr.InvalidConfig},
		{"unknown key", map[string]string{"foo": "1"}, nil, kerr.InvalidConfig},
		{"unknown delete", nil, []string{"foo"}, kerr.InvalidConfig},
		{"set and delete", map[string]string{"retention.ms": "5"}, []string{"retention.ms"}, kerr.InvalidRequest}, // Kafka: a key named twice in one request
	} {
		topic := "t"
		if tc.want == kerr.UnknownTopicOrPartition {
			topic = "nope"
		}
		if err := c.AlterTopicConfig(topic, tc.set, tc.del); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if cfg := c.TopicConfig("t"); len(cfg) != 1 || cfg["retention.ms"] != "1000" {
		t.Fatalf("failed alters changed config: %v", cfg)
	}
	if err := c.AlterTopicConfig("t", map[string]string{"min.insync.replicas": "2"}, []string{"retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if cfg := c.TopicConfig("t"); len(cfg) != 1 || cfg["min.insync.replicas"] != "2" {
		t.Fatalf("config %v", cfg)
	}
	// Offline partition; enabling unclean election elects the out-of-ISR replica.
	cur := mustPart(t, c, "t", 0)
	if _, err := alterISR(c, "t", 0, 1, cur.LeaderEpoch, cur.PartitionEpoch, []int32{1}); err != nil {
		t.Fatal(err)
	}
	c.BrokerDown(1)
	if st := mustPart(t, c, "t", 0); st.Leader != NoLeader {
		t.Fatalf("expected offline: %v", st)
	}
	if err := c.AlterTopicConfig("t", map[string]string{"unclean.leader.election.enable": "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := mustPart(t, c, "t", 0); st.Leader != 2 || !slices.Equal(st.ISR, []int32{2}) {
		t.Fatalf("after enabling unclean: %v", st)
	}
	if s := c.Stats(); s.UncleanElections != 1 || s.LostOffsets != 5 {
		t.Fatalf("stats %+v", s)
	}
}

// onPartition adapts a partition-state callback to Subscribe (topic updates are ignored).
func onPartition(fn func(PartitionState)) func(Update) {
	return func(u Update) {
		if u.Partition != nil {
			fn(*u.Partition)
		}
	}
}

// alterISR is AlterPartition with every proposed member's current broker epoch (the
// tests here are about the ISR rules, not about incarnations).
func alterISR(c *Controller, topic string, p int32, leader, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	epochs := make([]int64, len(isr))
	for i, id := range isr {
		epochs[i] = c.BrokerEpoch(id)
	}
	return c.AlterPartition(AlterPartitionRequest{Topic: topic, Partition: p, Leader: leader, LeaderBrokerEpoch: -1,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr, BrokerEpochs: epochs})
}
