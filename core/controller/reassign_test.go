package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

// reassignFixture is a controller with brokers 1..3 holding topic "t" (one partition on
// [1 2 3], led by 1), then brokers 4..n registered.
func reassignFixture(t *testing.T, n int, topicCfg map[string]string) *Controller {
	t.Helper()
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, topicCfg)
	for id := int32(4); id <= int32(n); id++ {
		if _, err := c.RegisterBroker(Registration{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	wantPart(t, c, "created", ps{leader: 1, replicas: ids(1, 2, 3), isr: ids(1, 2, 3)})
	return c
}

func ids(v ...int32) []int32 { return v }

// ps is the expected state of partition t-0.
type ps struct {
	leader                          int32
	replicas, isr, adding, removing []int32
	leaderEpoch, partitionEpoch     int32
}

func wantPart(t *testing.T, c *Controller, what string, w ps) PartitionState {
	t.Helper()
	st := mustPart(t, c, "t", 0)
	if st.Leader != w.leader || !slices.Equal(st.Replicas, w.replicas) || !slices.Equal(st.ISR, w.isr) ||
		!slices.Equal(st.AddingReplicas, w.adding) || !slices.Equal(st.RemovingReplicas, w.removing) ||
		st.LeaderEpoch != w.leaderEpoch || st.PartitionEpoch != w.partitionEpoch {
		t.Fatalf("%s: %v\nwant leader %d replicas %v isr %v adding %v removing %v epochs %d/%d", what, st,
			w.leader, w.replicas, w.isr, w.adding, w.removing, w.leaderEpoch, w.partitionEpoch)
	}
	checkInvariants(t, c)
	for _, r := range append(slices.Clone(st.AddingReplicas), st.RemovingReplicas...) {
		if !slices.Contains(st.Replicas, r) {
			t.Fatalf("%s: %v: adding or removing replica %d is not a replica", what, st, r)
		}
	}
	return st
}

func reassign(t *testing.T, c *Controller, target []int32) error {
	t.Helper()
	return c.AlterPartitionReassignments([]Reassignment{{Topic: "t", Partition: 0, Replicas: target}}, true)[0]
}

func mustReassign(t *testing.T, c *Controller, target []int32) {
	t.Helper()
	if err := reassign(t, c, target); err != nil {
		t.Fatalf("reassign t-0 to %v: %v", target, err)
	}
}

// TestReassignMove moves t-0 from [1 2 3] to [2 3 4]: broker 4 is added outside the ISR
// (partition epoch only), joins it through the leader's AlterPartition, and that change
// completes the reassignment: 1, the leader, is removed, 2 is elected and the leader epoch
// bumped. Broker 1 hears of the final state, which no longer names it.
func TestReassignMove(t *testing.T) {
	c := reassignFixture(t, 4, nil)
	var one, four updates
	defer c.Subscribe(1, one.fn)()
	defer c.Subscribe(4, four.fn)()

	mustReassign(t, c, ids(2, 3, 4))
	wantPart(t, c, "started", ps{leader: 1, replicas: ids(2, 3, 4, 1), isr: ids(1, 2, 3), adding: ids(4), removing: ids(1), partitionEpoch: 1})
	got := c.ListPartitionReassignments(nil)
	if len(got) != 1 || got[0].Topic != "t" || !slices.Equal(got[0].Replicas, ids(2, 3, 4, 1)) ||
		!slices.Equal(got[0].AddingReplicas, ids(4)) || !slices.Equal(got[0].RemovingReplicas, ids(1)) {
		t.Fatalf("ListPartitionReassignments: %+v", got)
	}
	if got := c.ListPartitionReassignments([]TopicPartition{{"t", 0}, {"t", 0}, {"t", 7}, {"nope", 0}}); len(got) != 1 {
		t.Fatalf("ListPartitionReassignments of named partitions: %+v", got)
	}
	// The same target again changes nothing.
	mustReassign(t, c, ids(2, 3, 4))
	wantPart(t, c, "same target", ps{leader: 1, replicas: ids(2, 3, 4, 1), isr: ids(1, 2, 3), adding: ids(4), removing: ids(1), partitionEpoch: 1})

	// A shrink by the leader does not complete it (4 is not in sync yet).
	if _, err := alterISR(c, "t", 0, 1, 0, 1, ids(1, 2)); err != nil {
		t.Fatal(err)
	}
	wantPart(t, c, "shrunk", ps{leader: 1, replicas: ids(2, 3, 4, 1), isr: ids(1, 2), adding: ids(4), removing: ids(1), partitionEpoch: 2})
	if _, err := alterISR(c, "t", 0, 1, 0, 2, ids(1, 2, 4)); err != nil {
		t.Fatal(err)
	}
	wantPart(t, c, "4 joined, 3 not", ps{leader: 1, replicas: ids(2, 3, 4, 1), isr: ids(1, 2, 4), adding: ids(4), removing: ids(1), partitionEpoch: 3})
	st, err := alterISR(c, "t", 0, 1, 0, 3, ids(1, 2, 4, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := ps{leader: 2, replicas: ids(2, 3, 4), isr: ids(2, 4, 3), leaderEpoch: 1, partitionEpoch: 4}
	wantPart(t, c, "completed", want)
	if st.Leader != 2 || st.Reassigning() {
		t.Fatalf("AlterPartition returned %v, want the completed state", st)
	}
	if got := c.ListPartitionReassignments(nil); len(got) != 0 {
		t.Fatalf("ListPartitionReassignments after completion: %+v", got)
	}
	if s := c.Stats(); s.Elections != 1 {
		t.Fatalf("stats %+v, want the one election of the completion", s)
	}
	ctx := syncCtx(t)
	for _, b := range []int32{1, 4} {
		if err := c.Sync(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	last := func(u *updates) PartitionState {
		all := u.all()
		return *all[len(all)-1].Partition
	}
	if st := last(&one); st.PartitionEpoch != 4 || slices.Contains(st.Replicas, 1) {
		t.Fatalf("removed broker 1 last heard %v, want the completed state", st)
	}
	if st := four.all()[0].Partition; st == nil || st.PartitionEpoch != 1 || !slices.Equal(st.AddingReplicas, ids(4)) {
		t.Fatalf("added broker 4 first heard %+v, want the started reassignment", four.all()[0])
	}
}

// TestReassignCompletesAtOnce: a target the ISR already holds completes in the request
// itself; the leader epoch is bumped only when a replica is removed.
func TestReassignCompletesAtOnce(t *testing.T) {
	c := reassignFixture(t, 3, nil)
	mustReassign(t, c, ids(3, 1, 2))
	wantPart(t, c, "reordered", ps{leader: 1, replicas: ids(3, 1, 2), isr: ids(1, 2, 3), partitionEpoch: 1})
	err := c.AlterPartitionReassignments([]Reassignment{{Topic: "t", Replicas: ids(1, 2)}}, false)[0]
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("RF change without AllowReplicationFactorChange: %v", err)
	}
	mustReassign(t, c, ids(2, 3))
	wantPart(t, c, "leader removed", ps{leader: 2, replicas: ids(2, 3), isr: ids(2, 3), leaderEpoch: 1, partitionEpoch: 2})
	if _, err := alterISR(c, "t", 0, 2, 1, 2, ids(2)); err != nil {
		t.Fatal(err)
	}
	mustReassign(t, c, ids(2))
	wantPart(t, c, "follower removed", ps{leader: 2, replicas: ids(2), isr: ids(2), leaderEpoch: 2, partitionEpoch: 4})
}

// TestReassignValidation: Kafka's per-partition errors; one request's valid entries are
// applied.
func TestReassignValidation(t *testing.T) {
	c := reassignFixture(t, 4, nil)
	errs := c.AlterPartitionReassignments([]Reassignment{
		{Topic: "t", Partition: 0, Replicas: []int32{}},
		{Topic: "t", Partition: 0, Replicas: ids(2, 2, 3)},
		{Topic: "t", Partition: 0, Replicas: ids(2, 3, 9)},
		{Topic: "t", Partition: 1, Replicas: ids(1, 2, 3)},
		{Topic: "nope", Partition: 0, Replicas: ids(1, 2, 3)},
		{Topic: "t", Partition: 0, Replicas: nil},
		{Topic: "t", Partition: 0, Replicas: ids(1, 2, 4)},
	}, true)
	for i, want := range []error{kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition, kerr.NoReassignmentInProgress, nil} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("entry %d: %v, want %v", i, errs[i], want)
		}
	}
	wantPart(t, c, "valid entry applied", ps{leader: 1, replicas: ids(1, 2, 4, 3), isr: ids(1, 2, 3), adding: ids(4), removing: ids(3), partitionEpoch: 1})
}

// TestReassignCancel: cancelling reverts to the original replicas, dropping the adding
// ones from the replicas and the ISR (leader epoch bumped: replicas were removed); a
// cancellation that would leave only out-of-sync original replicas needs unclean election.
func TestReassignCancel(t *testing.T) {
	c := reassignFixture(t, 5, nil)
	var five updates
	defer c.Subscribe(5, five.fn)()
	mustReassign(t, c, ids(3, 4, 5))
	wantPart(t, c, "started", ps{leader: 1, replicas: ids(3, 4, 5, 1, 2), isr: ids(1, 2, 3), adding: ids(4, 5), removing: ids(1, 2), partitionEpoch: 1})
	if _, err := alterISR(c, "t", 0, 1, 0, 1, ids(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	wantPart(t, c, "4 joined", ps{leader: 1, replicas: ids(3, 4, 5, 1, 2), isr: ids(1, 2, 3, 4), adding: ids(4, 5), removing: ids(1, 2), partitionEpoch: 2})
	mustReassign(t, c, nil)
	wantPart(t, c, "cancelled", ps{leader: 1, replicas: ids(3, 1, 2), isr: ids(1, 2, 3), leaderEpoch: 1, partitionEpoch: 3})
	if err := c.Sync(syncCtx(t), 5); err != nil {
		t.Fatal(err)
	}
	if all := five.all(); slices.Contains(all[len(all)-1].Partition.Replicas, 5) {
		t.Fatalf("broker 5 last heard %v, want the cancelled state", all[len(all)-1].Partition)
	}
	if err := reassign(t, c, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancelling again: %v", err)
	}

	// Leadership moved to an adding replica, then every original replica failed: the
	// revert would need an unclean election.
	for _, unclean := range []bool{false, true} {
		cfg := map[string]string{ConfigUncleanLeaderElectionEnable: "false"}
		if unclean {
			cfg[ConfigUncleanLeaderElectionEnable] = "true"
		}
		c := reassignFixture(t, 5, cfg)
		mustReassign(t, c, ids(4, 5))
		if _, err := alterISR(c, "t", 0, 1, 0, 1, ids(1, 2, 3, 4)); err != nil {
			t.Fatal(err)
		}
		for _, b := range []int32{1, 2, 3} {
			c.BrokerDown(b)
		}
		wantPart(t, c, "originals failed", ps{leader: 4, replicas: ids(4, 5, 1, 2, 3), isr: ids(4), adding: ids(4, 5), removing: ids(1, 2, 3), leaderEpoch: 1, partitionEpoch: 5})
		err := reassign(t, c, nil)
		if !unclean {
			if !errors.Is(err, kerr.InvalidReplicaAssignment) {
				t.Fatalf("cancel needing an unclean election, disabled: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cancel needing an unclean election, enabled: %v", err)
		}
		// Back to [1 2 3] with ISR [1]; none is alive, so offline until 1 is back.
		wantPart(t, c, "reverted uncleanly", ps{leader: NoLeader, replicas: ids(1, 2, 3), isr: ids(1), leaderEpoch: 2, partitionEpoch: 6})
		c.BrokerUp(1)
		wantPart(t, c, "1 back", ps{leader: 1, replicas: ids(1, 2, 3), isr: ids(1), leaderEpoch: 3, partitionEpoch: 7})
	}
}

// TestReassignRacesBrokerFailure: the leader being removed fails while the new replica
// catches up; the election prefers the target replicas and the new leader's AlterPartition
// completes the move. The added broker failing before it joined holds the reassignment
// until it is back.
func TestReassignRacesBrokerFailure(t *testing.T) {
	c := reassignFixture(t, 4, nil)
	mustReassign(t, c, ids(2, 3, 4))
	c.BrokerDown(1)
	wantPart(t, c, "leader failed", ps{leader: 2, replicas: ids(2, 3, 4, 1), isr: ids(2, 3), adding: ids(4), removing: ids(1), leaderEpoch: 1, partitionEpoch: 2})
	c.BrokerDown(4)
	wantPart(t, c, "added broker failed", ps{leader: 2, replicas: ids(2, 3, 4, 1), isr: ids(2, 3), adding: ids(4), removing: ids(1), leaderEpoch: 1, partitionEpoch: 2})
	if _, err := alterISR(c, "t", 0, 2, 1, 2, ids(2, 3, 4)); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("a fenced adding replica joined the ISR: %v", err)
	}
	c.BrokerUp(4)
	if _, err := alterISR(c, "t", 0, 2, 1, 2, ids(2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	wantPart(t, c, "completed", ps{leader: 2, replicas: ids(2, 3, 4), isr: ids(2, 3, 4), leaderEpoch: 2, partitionEpoch: 3})

	// The whole original ISR fails while the move is under way: offline, and the move
	// waits for them.
	c = reassignFixture(t, 4, nil)
	mustReassign(t, c, ids(4))
	for _, b := range []int32{2, 3, 1} {
		c.BrokerDown(b)
	}
	wantPart(t, c, "offline", ps{leader: NoLeader, replicas: ids(4, 1, 2, 3), isr: ids(1), adding: ids(4), removing: ids(1, 2, 3), leaderEpoch: 1, partitionEpoch: 4})
	c.BrokerUp(1)
	wantPart(t, c, "back", ps{leader: 1, replicas: ids(4, 1, 2, 3), isr: ids(1), adding: ids(4), removing: ids(1, 2, 3), leaderEpoch: 2, partitionEpoch: 5})
	if _, err := alterISR(c, "t", 0, 1, 2, 5, ids(1, 4)); err != nil {
		t.Fatal(err)
	}
	wantPart(t, c, "completed", ps{leader: 4, replicas: ids(4), isr: ids(4), leaderEpoch: 3, partitionEpoch: 6})
}

// TestReassignSurvivesRestart: a reassignment in progress is in the metadata log; a
// controller reopened on it lists it, and the move completes when the new replica joins.
func TestReassignSurvivesRestart(t *testing.T) {
	fs := vfs.NewMemFS(nil)
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, fs, "/meta", clk)
	for id := int32(1); id <= 4; id++ {
		if _, err := c.RegisterBroker(Registration{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTopic("t", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	st := mustPart(t, c, "t", 0)
	target := append(slices.Clone(st.Replicas[1:]), 4)
	if slices.Contains(st.Replicas, 4) {
		t.Fatalf("placement %v: the test wants broker 4 outside it", st.Replicas)
	}
	mustReassign(t, c, target)
	c.Close()

	c, _ = openStoreCtl(t, fs, "/meta", clk)
	got := c.ListPartitionReassignments(nil)
	if len(got) != 1 || !slices.Equal(got[0].AddingReplicas, ids(4)) || !slices.Equal(got[0].RemovingReplicas, st.Replicas[:1]) {
		t.Fatalf("reopened: reassignments %+v", got)
	}
	for id := int32(1); id <= 4; id++ {
		if _, err := c.RegisterBroker(Registration{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	cur := mustPart(t, c, "t", 0)
	if cur.Leader == NoLeader {
		t.Fatalf("reopened and registered: %v", cur)
	}
	isr := append(slices.Clone(cur.ISR), 4)
	for _, r := range cur.Replicas {
		if !slices.Contains(isr, r) && r != 4 {
			isr = append(isr, r)
		}
	}
	// Members that rejoin after the restart, and 4: every target replica in sync.
	for _, r := range isr {
		if r == cur.Leader {
			continue
		}
		now := mustPart(t, c, "t", 0)
		if slices.Contains(now.ISR, r) || !now.Reassigning() {
			continue
		}
		if _, err := alterISR(c, "t", 0, now.Leader, now.LeaderEpoch, now.PartitionEpoch, append(slices.Clone(now.ISR), r)); err != nil {
			t.Fatal(err)
		}
	}
	final := mustPart(t, c, "t", 0)
	if final.Reassigning() || !slices.Equal(final.Replicas, target) {
		t.Fatalf("after the restart the move did not complete: %v (target %v)", final, target)
	}
}

// TestThrottledReplicasConfig: the throttled replicas topic configs take Kafka's values (a
// list of partition:broker, or *), normalized; the rates are dynamic broker configs.
func TestThrottledReplicasConfig(t *testing.T) {
	for _, key := range []string{ConfigLeaderThrottledReplicas, ConfigFollowerThrottledReplicas} {
		for v, want := range map[string]string{"*": "*", " * ": "*", "": "", "0:1,1:2": "0:1,1:2", " 0:1 , 1:2 ,": "0:1,1:2"} {
			if got, err := ValidateTopicConfig(key, v, 3); err != nil || got != want {
				t.Errorf("%s=%q: %q %v, want %q", key, v, got, err, want)
			}
		}
		for _, v := range []string{"0", "a:1", "0:1,*", "1:-2", "0:1:2"} {
			if _, err := ValidateTopicConfig(key, v, 3); !errors.Is(err, kerr.InvalidConfig) {
				t.Errorf("%s=%q: %v, want INVALID_CONFIG", key, v, err)
			}
		}
	}
	for _, key := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		if v, err := ValidateBrokerConfig(key, "1048576"); err != nil || v != "1048576" {
			t.Errorf("%s: %q %v", key, v, err)
		}
		if _, err := ValidateBrokerConfig(key, "-1"); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("%s=-1: %v", key, err)
		}
	}
}
