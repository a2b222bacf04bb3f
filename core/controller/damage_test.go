package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReportDamagedReplica: a damaged leader gives way to an undamaged ISR member and leaves
// the ISR; a damaged follower leaves the ISR; neither is elected cleanly while damaged; the
// join rule (AlterPartition adding it back) clears the mark; stale incarnations are ignored.
func TestReportDamagedReplica(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, nil)
	st := mustPart(t, c, "t", 0)
	leader := st.Leader
	if _, err := c.ReportDamagedReplica(leader, c.BrokerEpoch(leader)+1, "t", 0); err != nil {
		t.Fatal(err)
	}
	if got := mustPart(t, c, "t", 0); got.Leader != leader || len(c.Damaged("t", 0)) != 0 {
		t.Fatalf("a stale incarnation's report changed %v (damaged %v)", got, c.Damaged("t", 0))
	}
	out, err := c.ReportDamagedReplica(leader, c.BrokerEpoch(leader), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Leader == leader || out.Leader == NoLeader || slices.Contains(out.ISR, leader) || out.LeaderEpoch != st.LeaderEpoch+1 {
		t.Fatalf("after the leader %d reported damage: %v, want another leader in a new epoch and %d out of the ISR", leader, out, leader)
	}
	if d := c.Damaged("t", 0); !slices.Equal(d, []int32{leader}) {
		t.Fatalf("Damaged = %v, want [%d]", d, leader)
	}
	checkInvariants(t, c)
	// A follower in the ISR reports damage: it leaves the ISR too.
	follower := slices.DeleteFunc(slices.Clone(out.ISR), func(r int32) bool { return r == out.Leader })[0]
	out2, err := c.ReportDamagedReplica(follower, c.BrokerEpoch(follower), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out2.ISR, []int32{out.Leader}) || out2.Leader != out.Leader {
		t.Fatalf("after the follower %d reported damage: %v, want ISR [%d]", follower, out2, out.Leader)
	}
	// The last ISR member, damaged, keeps leading: it holds the only in-sync copy.
	out3, err := c.ReportDamagedReplica(out.Leader, c.BrokerEpoch(out.Leader), "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if out3.Leader != out.Leader || !slices.Equal(out3.ISR, []int32{out.Leader}) {
		t.Fatalf("the last ISR member reported damage: %v, want it to keep leading", out3)
	}
	// The healed replicas rejoin by the join rule; that clears their marks.
	out4, err := alterISR(c, "t", 0, out3.Leader, out3.LeaderEpoch, out3.PartitionEpoch, []int32{out3.Leader, leader, follower})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Damaged("t", 0); !slices.Equal(d, []int32{out3.Leader}) {
		t.Fatalf("after %d and %d rejoined: Damaged = %v, want only [%d]", leader, follower, d, out3.Leader)
	}
	// The partition's leader is still damaged: a preferred election may not move to it,
	// but a transfer to a healed replica may.
	if _, err := c.TransferLeader("t", 0, leader); err != nil {
		t.Fatalf("transfer to the healed %d (state %v): %v", leader, out4, err)
	}
	if _, err := c.ReportDamagedReplica(1, -1, "nope", 0); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("report for an unknown topic: %v", err)
	}
	checkInvariants(t, c)
}
