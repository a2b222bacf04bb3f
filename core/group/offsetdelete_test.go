package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// oneMember brings group "g" to Stable with one member of protocol type ptype whose
// protocol metadata is md.
func oneMember(t *testing.T, e *env, ptype string, md []byte) string {
	t.Helper()
	req := joinReq("", "")
	req.ProtocolType = ptype
	req.Protocols = []Protocol{{Name: "range", Metadata: md}}
	r, _ := e.join(req)
	wantErr(t, "first JoinGroup", r.Err, kerr.MemberIDRequired)
	req.MemberID = r.MemberID
	_, tk := e.join(req)
	e.advance(e.m.cfg.InitialRebalanceDelayMs)
	if j := e.joined(tk); j.Err != nil {
		t.Fatalf("join: %v", j.Err)
	}
	e.sync(req.MemberID, 1, map[string][]byte{req.MemberID: nil})
	if e.state() != Stable {
		t.Fatalf("state %v, want Stable", e.state())
	}
	return req.MemberID
}

func commitGen(t *testing.T, e *env, member string, gen int32, tps ...TP) {
	t.Helper()
	wantErr(t, "commit", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: gen, MemberID: member}), nil)
	offs := map[TP]Committed{}
	for _, tp := range tps {
		offs[tp] = Committed{Offset: 7, LeaderEpoch: -1}
	}
	e.m.CommitPending("g", offs)
	e.m.CommitStored("g", offs, 100, nil)
}

// TestDeleteOffsetsRules: Kafka's handleDeleteOffsets rules on the Machine.
func TestDeleteOffsetsRules(t *testing.T) {
	a0, a1, b0, x0 := TP{"a", 0}, TP{"a", 1}, TP{"b", 0}, TP{"x", 0}

	// An Empty group: every partition goes; the group goes with its last offset.
	e := newEnv(t, 0)
	commitGen(t, e, "", -1, a0, b0)
	_, recs, per, err := e.m.DeleteOffsets("g", []TP{a0})
	if err != nil || len(recs) != 1 || per[a0] != nil || e.state() != Empty {
		t.Fatalf("delete a-0 of an Empty group: %d records, %v, %v, state %v", len(recs), per, err, e.state())
	}
	if got, _ := e.m.Committed("g", nil); len(got) != 1 {
		t.Fatalf("offsets left %v, want b-0", got)
	}
	_, recs, per, err = e.m.DeleteOffsets("g", []TP{b0, x0})
	if err != nil || len(recs) != 2 || recs[1].Value != nil || string(recs[1].Key) != string(GroupKey("g")) || per[x0] != nil {
		t.Fatalf("delete the last offset: %d records, %v, %v", len(recs), per, err)
	}
	if e.state() != Dead {
		t.Fatalf("an Empty group without offsets is %v, want removed", e.state())
	}
	_, _, _, err = e.m.DeleteOffsets("g", []TP{a0})
	wantErr(t, "unknown group", err, kerr.GroupIDNotFound)
	_, _, _, err = e.m.DeleteOffsets("", []TP{a0})
	wantErr(t, "empty group id", err, kerr.InvalidGroupID)

	// A Stable consumer group subscribed to "a": GROUP_SUBSCRIBED_TO_TOPIC for a's partitions.
	e = newEnv(t, 0)
	sub := (&kmsg.ConsumerMemberMetadata{Version: 0, Topics: []string{"a"}}).AppendTo(nil)
	m := oneMember(t, e, "consumer", sub)
	commitGen(t, e, m, 1, a0, a1, b0)
	_, recs, per, err = e.m.DeleteOffsets("g", []TP{a0, a1, b0})
	if err != nil || len(recs) != 1 || per[b0] != nil {
		t.Fatalf("delete from a Stable group: %d records, %v, %v", len(recs), per, err)
	}
	wantErr(t, "subscribed a-0", per[a0], kerr.GroupSubscribedToTopic)
	wantErr(t, "subscribed a-1", per[a1], kerr.GroupSubscribedToTopic)
	if got, _ := e.m.Committed("g", nil); len(got) != 2 {
		t.Errorf("offsets left %v, want a-0 and a-1", got)
	}

	// Metadata that is not a consumer subscription: no topic counts as subscribed.
	e = newEnv(t, 0)
	m = oneMember(t, e, "consumer", []byte("not a subscription"))
	commitGen(t, e, m, 1, a0)
	if _, recs, per, err = e.m.DeleteOffsets("g", []TP{a0}); err != nil || per[a0] != nil || len(recs) != 1 {
		t.Errorf("unparsable subscriptions: %d records, %v, %v", len(recs), per, err)
	}

	// A non-empty group of another protocol type: NON_EMPTY_GROUP.
	e = newEnv(t, 0)
	m = oneMember(t, e, "connect", nil)
	commitGen(t, e, m, 1, a0)
	_, _, _, err = e.m.DeleteOffsets("g", []TP{a0})
	wantErr(t, "non-consumer group", err, kerr.NonEmptyGroup)
}
