package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/controller"
)

// TestReassignMovesReplica moves a partition off its leader onto a new broker: the added
// replica catches up as a follower and joins the ISR, which completes the move; leadership
// moves to a target replica and the removed broker deletes its replica and directory. Every
// acknowledged record is readable from the new leader and the target replicas hold identical
// logs. Moving it back starts an empty replica that is not taken for a damaged one.
func TestReassignMovesReplica(t *testing.T) {
	c := newTestCluster(t, 4, testConfig())
	c.createTopic("t", 1, 3, nil)
	st, _ := c.ctrl.Partition("t", 0)
	var spare int32 = -1
	for id := int32(0); id < 4; id++ {
		if !slices.Contains(st.Replicas, id) {
			spare = id
		}
	}
	var want []string
	for i := 0; i < 20; i++ {
		if pp := produce(t, c.leader("t", 0), -1, "t", 0, batch(fmt.Sprintf("before%d", i), 5)); pp.Err != nil {
			t.Fatal(pp.Err)
		}
		for j := 0; j < 5; j++ {
			want = append(want, fmt.Sprintf("before%d-%d", i, j))
		}
	}
	old := st.Leader
	target := append(slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return r == old }), spare)
	if errs := c.ctrl.AlterPartitionReassignments([]controller.Reassignment{{Topic: "t", Partition: 0, Replicas: target}}, true); errs[0] != nil {
		t.Fatal(errs[0])
	}
	dir := filepath.Join(c.dirs[old], "t-0")
	c.waitFor("the move completed and the old leader deleted its replica", 20*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		_, hosted := c.broker(old).Replica("t", 0)
		_, statErr := os.Stat(dir)
		return !st.Reassigning() && !hosted && os.IsNotExist(statErr)
	})
	st, _ = c.ctrl.Partition("t", 0)
	if !slices.Equal(st.Replicas, target) || !slices.Contains(target, st.Leader) || len(st.ISR) != 3 {
		t.Fatalf("after the move: %v, want replicas %v", st, target)
	}
	c.waitFor("the new leader serves", 10*time.Second, func() bool {
		r, ok := c.broker(st.Leader).Replica("t", 0)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
	})
	for i := 0; i < 5; i++ {
		if pp := produce(t, c.leader("t", 0), -1, "t", 0, batch(fmt.Sprintf("after%d", i), 5)); pp.Err != nil {
			t.Fatal(pp.Err)
		}
		for j := 0; j < 5; j++ {
			want = append(want, fmt.Sprintf("after%d-%d", i, j))
		}
	}
	got, _ := consume(t, c.leader("t", 0), "t", 0, 0)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records from the new leader, want the %d acknowledged", len(got), len(want))
	}
	c.waitFor("every target replica at the HW", 10*time.Second, func() bool {
		lr, _ := c.broker(st.Leader).Replica("t", 0)
		for _, id := range target {
			r, ok := c.broker(id).Replica("t", 0)
			if !ok || r.LEO() < lr.HW() {
				return false
			}
		}
		return true
	})
	c.assertReplicasIdentical("t", 0)

	// Back onto the broker that deleted it: an empty replica that catches up.
	back := append(slices.Clone(target[:2]), old)
	if errs := c.ctrl.AlterPartitionReassignments([]controller.Reassignment{{Topic: "t", Partition: 0, Replicas: back}}, true); errs[0] != nil {
		t.Fatal(errs[0])
	}
	c.waitFor("moved back", 20*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		_, hosted := c.broker(spare).Replica("t", 0)
		return !st.Reassigning() && !hosted && slices.Contains(st.ISR, old)
	})
	if d := c.ctrl.Damaged("t", 0); len(d) != 0 {
		t.Fatalf("damaged replicas %v after moving back", d)
	}
	c.assertReplicasIdentical("t", 0)
}
