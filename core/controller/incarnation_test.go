package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// alive reports whether broker id is registered and unfenced.
func alive(t *testing.T, c *Controller, id int32) bool {
	t.Helper()
	b, ok := c.Broker(id)
	if !ok {
		t.Fatalf("broker %d not registered", id)
	}
	return b.Alive
}

// wantState fails unless topic-p has the given leader, ISR and epochs.
func wantState(t *testing.T, c *Controller, what, topic string, p int32, leader int32, isr []int32, le, pe int32) PartitionState {
	t.Helper()
	st := mustPart(t, c, topic, p)
	if st.Leader != leader || !slices.Equal(st.ISR, isr) || st.LeaderEpoch != le || st.PartitionEpoch != pe {
		t.Fatalf("%s: %v, want leader %d isr %v epochs %d/%d", what, st, leader, isr, le, pe)
	}
	return st
}

// TestRegisterBrokerEpochs: every registration of a broker (every start of its process) gets
// a broker epoch larger than any given before, of any broker; BrokerEpoch reports the current
// one while the broker is unfenced and -1 while it is fenced.
func TestRegisterBrokerEpochs(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	seen := map[int64]bool{}
	var last int64
	for id := int32(1); id <= 3; id++ {
		e := c.BrokerEpoch(id)
		if e <= last || seen[e] {
			t.Fatalf("broker %d epoch %d after %d", id, e, last)
		}
		seen[e], last = true, e
	}
	for _, id := range []int32{2, 2, 1, 3, 2} {
		old := c.BrokerEpoch(id)
		e := mustRegister(t, c, Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
		if e <= last || e <= old || seen[e] {
			t.Fatalf("re-registration of broker %d: epoch %d, previous %d, newest before %d", id, e, old, last)
		}
		if got := c.BrokerEpoch(id); got != e {
			t.Fatalf("BrokerEpoch(%d) = %d after registering epoch %d", id, got, e)
		}
		seen[e], last = true, e
	}
	c.BrokerDown(3)
	if e := c.BrokerEpoch(3); e != -1 {
		t.Errorf("BrokerEpoch of a fenced broker = %d, want -1", e)
	}
	if e := c.BrokerEpoch(42); e != -1 {
		t.Errorf("BrokerEpoch of an unknown broker = %d, want -1", e)
	}
}

// TestHeartbeatOfOldIncarnationIgnored: a heartbeat carrying the broker epoch of a previous
// registration neither keeps the session alive nor unfences a session-fenced broker; the
// current epoch (or -1, no check) does both.
func TestHeartbeatOfOldIncarnationIgnored(t *testing.T) {
	c, clk := newTestController(t, 2, Config{BrokerSessionTimeoutMs: 1000})
	old := c.BrokerEpoch(1)
	cur := mustRegister(t, c, Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	clk.Advance(800 * time.Millisecond)
	c.Heartbeat(1, old) // the previous process, still heartbeating
	c.Heartbeat(2, c.BrokerEpoch(2))
	clk.Advance(400 * time.Millisecond) // 1.2 s since broker 1's registration
	c.CheckSessions()
	if alive(t, c, 1) {
		t.Fatal("a heartbeat of the old incarnation kept the new one's session alive")
	}
	if !alive(t, c, 2) {
		t.Fatal("broker 2 fenced although it heartbeated with its current epoch")
	}
	c.Heartbeat(1, old)
	if alive(t, c, 1) {
		t.Fatal("a heartbeat of the old incarnation unfenced the broker")
	}
	c.Heartbeat(1, cur)
	if !alive(t, c, 1) {
		t.Fatal("a heartbeat with the current epoch did not unfence the session-fenced broker")
	}
	if e := c.BrokerEpoch(1); e != cur {
		t.Fatalf("unfenced by heartbeat: epoch %d, want %d (a heartbeat is no new incarnation)", e, cur)
	}
}

// TestReRegisteredBrokerLeavesISRs: a new incarnation of a follower leaves every ISR of a
// partition that has a leader (it must truncate and catch up first); a new incarnation of a
// leader loses its leaderships to the next ISR member and leaves the ISRs too. It rejoins
// only by an AlterPartition carrying its new broker epoch.
func TestReRegisteredBrokerLeavesISRs(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, nil) // [1 2 3], leader 1
	old3 := c.BrokerEpoch(3)
	new3 := mustRegister(t, c, Registration{ID: 3, Host: "127.0.0.1", Port: 9093})
	wantState(t, c, "follower 3 re-registered", "t", 0, 1, []int32{1, 2}, 0, 1)
	if !alive(t, c, 3) {
		t.Fatal("re-registered broker is fenced")
	}
	checkInvariants(t, c)

	c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	wantState(t, c, "leader 1 re-registered", "t", 0, 2, []int32{2}, 1, 2)
	if s := c.Stats(); s.Elections != 1 || s.UncleanElections != 0 {
		t.Errorf("stats %+v: want one clean election", s)
	}
	checkInvariants(t, c)

	// Broker 3 rejoins from leader 2: its old incarnation's epoch is refused, the new one
	// accepted.
	st := mustPart(t, c, "t", 0)
	req := AlterPartitionRequest{Topic: "t", Partition: 0, Leader: 2, LeaderBrokerEpoch: c.BrokerEpoch(2),
		LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: []int32{2, 3}, BrokerEpochs: []int64{-1, old3}}
	if _, err := c.AlterPartition(req); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("expansion with the old incarnation's epoch: %v, want INELIGIBLE_REPLICA", err)
	}
	req.BrokerEpochs[1] = new3
	if got, err := c.AlterPartition(req); err != nil || !slices.Equal(got.ISR, []int32{2, 3}) {
		t.Fatalf("expansion with the current epoch: %v %v", got, err)
	}
	checkInvariants(t, c)
}

// TestStaleBrokerEpochAlterPartition: an AlterPartition of a leader's previous incarnation
// (its broker epoch is not the current registration's) is refused with STALE_BROKER_EPOCH,
// even when the new incarnation leads the same partition again.
func TestStaleBrokerEpochAlterPartition(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 1, 3, nil)
	st := mustPart(t, c, "t", 0)
	if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1}); err != nil {
		t.Fatal(err)
	}
	old := c.BrokerEpoch(1)
	before := mustPart(t, c, "t", 0) // ISR [1]
	// Broker 1 restarts: its old incarnation is fenced (the partition goes offline, 1 being
	// its last ISR member), the new one is elected again at once (clean, not damaged).
	cur := mustRegister(t, c, Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	after := wantState(t, c, "last ISR member re-registered", "t", 0, 1, []int32{1}, before.LeaderEpoch+2, before.PartitionEpoch+2)
	for _, tc := range []struct {
		name string
		req  AlterPartitionRequest
		want *kerr.Error
	}{
		{"old incarnation, old epochs", AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: old,
			LeaderEpoch: before.LeaderEpoch, PartitionEpoch: before.PartitionEpoch, ISR: []int32{1, 2}, BrokerEpochs: []int64{-1, c.BrokerEpoch(2)}}, kerr.StaleBrokerEpoch},
		{"old incarnation, current epochs", AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: old,
			LeaderEpoch: after.LeaderEpoch, PartitionEpoch: after.PartitionEpoch, ISR: []int32{1, 2}, BrokerEpochs: []int64{-1, c.BrokerEpoch(2)}}, kerr.StaleBrokerEpoch},
		{"a future broker epoch", AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: cur + 1,
			LeaderEpoch: after.LeaderEpoch, PartitionEpoch: after.PartitionEpoch, ISR: []int32{1, 2}, BrokerEpochs: []int64{-1, c.BrokerEpoch(2)}}, kerr.StaleBrokerEpoch},
		{"current incarnation, old leader epoch", AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: cur,
			LeaderEpoch: before.LeaderEpoch, PartitionEpoch: after.PartitionEpoch, ISR: []int32{1, 2}, BrokerEpochs: []int64{-1, c.BrokerEpoch(2)}}, kerr.FencedLeaderEpoch},
	} {
		got, err := c.AlterPartition(tc.req)
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want.Message)
		}
		if got.PartitionEpoch != after.PartitionEpoch || !slices.Equal(got.ISR, after.ISR) {
			t.Errorf("%s: returned %v, want the current state %v", tc.name, got, after)
		}
	}
	_, err := c.AlterPartition(AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: old,
		LeaderEpoch: after.LeaderEpoch, PartitionEpoch: after.PartitionEpoch, ISR: []int32{1}})
	if err == nil || !strings.Contains(err.Error(), "is not its current registration") {
		t.Errorf("stale broker epoch: error %v does not name the registration", err)
	}
	wantState(t, c, "after refused requests", "t", 0, 1, []int32{1}, after.LeaderEpoch, after.PartitionEpoch)
	req := AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: cur, LeaderEpoch: after.LeaderEpoch,
		PartitionEpoch: after.PartitionEpoch, ISR: []int32{1, 2}, BrokerEpochs: []int64{-1, c.BrokerEpoch(2)}}
	if _, err := c.AlterPartition(req); err != nil {
		t.Fatalf("the current incarnation's request: %v", err)
	}
}

// TestDamagedLastISRMember: an offline partition whose last ISR member comes back with a
// damaged replica (its log ends below the HW it checkpointed) stays offline under clean
// election; enabling unclean.leader.election.enable elects an undamaged out-of-ISR replica
// if one is alive, else the damaged one, whose damage the unclean election clears.
func TestDamagedLastISRMember(t *testing.T) {
	damaged := []TopicPartition{{Topic: "t", Partition: 0}}
	setup := func(t *testing.T) *Controller {
		c, _ := newTestController(t, 3, Config{})
		mustCreate(t, c, "t", 1, 3, nil)
		st := mustPart(t, c, "t", 0)
		if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1}); err != nil {
			t.Fatal(err)
		}
		c.BrokerDown(1)
		wantState(t, c, "offline", "t", 0, NoLeader, []int32{1}, 1, 2)
		return c
	}
	t.Run("undamaged comes back as leader", func(t *testing.T) {
		c := setup(t)
		c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
		wantState(t, c, "healthy last member registered", "t", 0, 1, []int32{1}, 2, 3)
		if d := c.Damaged("t", 0); len(d) != 0 {
			t.Errorf("damaged %v", d)
		}
	})
	t.Run("damaged stays offline, unclean elects it and clears the damage", func(t *testing.T) {
		c := setup(t)
		c.BrokerDown(2)
		c.BrokerDown(3)
		c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091, Damaged: damaged})
		wantState(t, c, "damaged last member registered", "t", 0, NoLeader, []int32{1}, 1, 2)
		if d := c.Damaged("t", 0); !slices.Equal(d, []int32{1}) {
			t.Fatalf("damaged %v, want [1]", d)
		}
		if !alive(t, c, 1) {
			t.Fatal("the damaged broker is fenced: it must run (and follow) while it does not lead")
		}
		if _, err := c.ElectLeader("t", 0, false); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
			t.Errorf("preferred election of a damaged replica: %v", err)
		}
		if _, err := c.TransferLeader("t", 0, 1); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("transfer to a damaged replica: %v", err)
		}
		if err := c.AlterTopicConfig("t", map[string]string{ConfigUncleanLeaderElectionEnable: "true"}, nil); err != nil {
			t.Fatal(err)
		}
		wantState(t, c, "unclean election", "t", 0, 1, []int32{1}, 2, 3)
		if d := c.Damaged("t", 0); len(d) != 0 {
			t.Errorf("damage %v kept after the unclean election made its log the truth", d)
		}
		if s := c.Stats(); s.UncleanElections != 1 {
			t.Errorf("stats %+v: want one unclean election", s)
		}
	})
	t.Run("unclean prefers an undamaged replica", func(t *testing.T) {
		c := setup(t)
		c.BrokerDown(2) // 3 stays alive, out of the ISR
		c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091, Damaged: damaged})
		wantState(t, c, "damaged last member registered", "t", 0, NoLeader, []int32{1}, 1, 2)
		if _, err := c.ElectLeader("t", 0, true); err != nil {
			t.Fatal(err)
		}
		wantState(t, c, "unclean election", "t", 0, 3, []int32{3}, 2, 3)
		if d := c.Damaged("t", 0); !slices.Equal(d, []int32{1}) {
			t.Errorf("damaged %v, want [1] (broker 1 has not rejoined)", d)
		}
	})
	t.Run("damaged member rejoining the ISR is healed", func(t *testing.T) {
		c := setup(t)
		c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091, Damaged: damaged})
		if _, err := c.ElectLeader("t", 0, true); err != nil {
			t.Fatal(err)
		}
		st := wantState(t, c, "unclean election", "t", 0, 2, []int32{2}, 2, 3)
		if _, err := alterISR(c, "t", 0, 2, st.LeaderEpoch, st.PartitionEpoch, []int32{2, 1}); err != nil {
			t.Fatal(err)
		}
		if d := c.Damaged("t", 0); len(d) != 0 {
			t.Errorf("damaged %v after broker 1 rejoined the ISR from a leader", d)
		}
	})
}

// TestAlterPartitionIneligibleReplicas: an expansion may add only brokers that are unfenced
// and fetch from their current incarnation (KIP-903): a broker fenced by a kill, an expired
// session or an offline log directory, or a broker epoch that is stale, unknown or missing,
// is INELIGIBLE_REPLICA (with INVALID_REQUEST as the error code), and nothing changes.
// Members already in the ISR are not re-checked by epoch.
func TestAlterPartitionIneligibleReplicas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(c *Controller, clk *fakeClock) // acts on broker 3, outside the ISR [1 2]
		epochs func(c *Controller, old3 int64) []int64
		want   bool // accepted
		msg    string
	}{
		{"current epoch", nil, func(c *Controller, _ int64) []int64 { return []int64{-1, -1, c.BrokerEpoch(3)} }, true, ""},
		{"killed", func(c *Controller, _ *fakeClock) { c.BrokerDown(3) },
			func(c *Controller, old3 int64) []int64 { return []int64{-1, -1, old3} }, false, "fenced broker 3"},
		{"session expired", func(c *Controller, clk *fakeClock) {
			clk.Advance(5 * time.Second)
			c.Heartbeat(1, -1)
			c.Heartbeat(2, -1)
			clk.Advance(5 * time.Second)
			c.CheckSessions()
		}, func(c *Controller, old3 int64) []int64 { return []int64{-1, -1, old3} }, false, "fenced broker 3"},
		{"offline log dir", func(c *Controller, _ *fakeClock) { c.ReportOfflineLogDir(3, c.BrokerEpoch(3)) },
			func(c *Controller, old3 int64) []int64 { return []int64{-1, -1, old3} }, false, "fenced broker 3"},
		{"old incarnation's epoch", func(c *Controller, _ *fakeClock) {
			c.RegisterBroker(Registration{ID: 3, Host: "127.0.0.1", Port: 9093})
		},
			func(c *Controller, old3 int64) []int64 { return []int64{-1, -1, old3} }, false, "adds broker 3 with broker epoch"},
		{"unknown epoch", nil, func(c *Controller, _ int64) []int64 { return []int64{-1, -1, -1} }, false, "broker epoch -1"},
		{"no epochs", nil, func(c *Controller, _ int64) []int64 { return nil }, false, "broker epoch -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clk := newTestController(t, 3, Config{BrokerSessionTimeoutMs: 9000})
			mustCreate(t, c, "t", 1, 3, nil)
			st := mustPart(t, c, "t", 0)
			if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1, 2}); err != nil {
				t.Fatal(err)
			}
			old3 := c.BrokerEpoch(3)
			if tc.setup != nil {
				tc.setup(c, clk)
			}
			before := mustPart(t, c, "t", 0)
			beforeStats := c.Stats()
			got, err := c.AlterPartition(AlterPartitionRequest{Topic: "t", Leader: 1, LeaderBrokerEpoch: c.BrokerEpoch(1),
				LeaderEpoch: before.LeaderEpoch, PartitionEpoch: before.PartitionEpoch, ISR: []int32{1, 2, 3}, BrokerEpochs: tc.epochs(c, old3)})
			if tc.want {
				if err != nil || !slices.Equal(got.ISR, []int32{1, 2, 3}) || got.PartitionEpoch != before.PartitionEpoch+1 {
					t.Fatalf("AlterPartition: %v %v", got, err)
				}
				return
			}
			var ke *kerr.Error
			if !errors.Is(err, kerr.IneligibleReplica) || !errors.As(err, &ke) || ke != kerr.InvalidRequest {
				t.Fatalf("AlterPartition: %v, want INVALID_REQUEST wrapping INELIGIBLE_REPLICA", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if cur := mustPart(t, c, "t", 0); !slices.Equal(cur.ISR, before.ISR) || cur.PartitionEpoch != before.PartitionEpoch {
				t.Errorf("refused AlterPartition changed the state: %v", cur)
			}
			if got.PartitionEpoch != before.PartitionEpoch {
				t.Errorf("returned %v, want the current state", got)
			}
			if c.Stats() != beforeStats {
				t.Errorf("refused AlterPartition changed the stats")
			}
		})
	}
	t.Run("partition epoch", func(t *testing.T) {
		c, _ := newTestController(t, 3, Config{})
		mustCreate(t, c, "t", 1, 3, nil)
		st := mustPart(t, c, "t", 0)
		for _, pe := range []int32{st.PartitionEpoch - 1, st.PartitionEpoch + 1} {
			if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, pe, []int32{1, 2}); !errors.Is(err, kerr.InvalidUpdateVersion) {
				t.Errorf("partition epoch %d (current %d): %v, want INVALID_UPDATE_VERSION", pe, st.PartitionEpoch, err)
			}
		}
		// A shrink that was accepted makes the next request with the old partition epoch stale.
		if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1, 2}); err != nil {
			t.Fatal(err)
		}
		if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1, 2, 3}); !errors.Is(err, kerr.InvalidUpdateVersion) {
			t.Errorf("second request on the old partition epoch: %v", err)
		}
		wantState(t, c, "after", "t", 0, 1, []int32{1, 2}, 0, 1)
	})
}

// TestReportOfflineLogDir: a broker whose log directory failed loses its leaderships to
// healthy ISR members and leaves every ISR; it stays fenced through heartbeats until it
// registers again. A report of an older incarnation changes nothing.
func TestReportOfflineLogDir(t *testing.T) {
	c, clk := newTestController(t, 3, Config{BrokerSessionTimeoutMs: 1000})
	mustCreate(t, c, "t", 3, 3, nil) // t-0 [1 2 3], t-1 [2 3 1], t-2 [3 1 2]
	before := mustPartitions(t, c, "t")
	old2 := c.BrokerEpoch(2)
	cur2 := mustRegister(t, c, Registration{ID: 2, Host: "127.0.0.1", Port: 9092}) // t-1 moves to 3; 2 leaves the ISRs
	// Broker 2 rejoins every ISR, and leads t-1 again.
	for p := int32(0); p < 3; p++ {
		st := mustPart(t, c, "t", p)
		if _, err := alterISR(c, "t", p, st.Leader, st.LeaderEpoch, st.PartitionEpoch, before[p].Replicas); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ElectLeader("t", 1, false); err != nil {
		t.Fatal(err)
	}
	c.ReportOfflineLogDir(2, old2) // the previous incarnation's report: ignored
	if !alive(t, c, 2) || mustPart(t, c, "t", 1).Leader != 2 {
		t.Fatalf("a stale offline-dir report fenced the broker: %v", mustPart(t, c, "t", 1))
	}
	mid := mustPartitions(t, c, "t")
	c.ReportOfflineLogDir(2, cur2)
	if alive(t, c, 2) {
		t.Fatal("broker with an offline log dir is not fenced")
	}
	for p, st := range mustPartitions(t, c, "t") {
		if slices.Contains(st.ISR, 2) {
			t.Errorf("t-%d: broker 2 still in ISR %v", p, st.ISR)
		}
		if st.Leader == 2 || st.Leader == NoLeader {
			t.Errorf("t-%d: leader %d after broker 2's log dir went offline", p, st.Leader)
		}
		if mid[p].Leader == 2 {
			if !slices.Contains(mid[p].ISR, st.Leader) || st.LeaderEpoch != mid[p].LeaderEpoch+1 {
				t.Errorf("t-%d: led by 2 in %v, now %v: want a healthy ISR member at the next leader epoch", p, mid[p], st)
			}
		} else if st.Leader != mid[p].Leader || st.LeaderEpoch != mid[p].LeaderEpoch {
			t.Errorf("t-%d: leadership changed %v -> %v although broker 2 did not lead it", p, mid[p], st)
		}
	}
	checkInvariants(t, c)
	// Heartbeats do not bring it back, with or without an expired session in between.
	c.Heartbeat(2, cur2)
	clk.Advance(2 * time.Second)
	c.Heartbeat(1, -1)
	c.Heartbeat(3, -1)
	c.CheckSessions()
	c.Heartbeat(2, cur2)
	if alive(t, c, 2) {
		t.Fatal("a heartbeat unfenced a broker whose log dir is offline")
	}
	// A restart with the disk repaired is a new incarnation: unfenced, in no ISR, leading nothing.
	c.RegisterBroker(Registration{ID: 2, Host: "127.0.0.1", Port: 9092})
	if !alive(t, c, 2) {
		t.Fatal("re-registration did not unfence")
	}
	for p, st := range mustPartitions(t, c, "t") {
		if st.Leader == 2 || slices.Contains(st.ISR, 2) {
			t.Errorf("t-%d: %v: the new incarnation leads or is in the ISR before catching up", p, st)
		}
	}
}

// TestReportOfflineLogDirLastISRMember: when the failed broker is the last ISR member, the
// partition goes offline (no clean leader), keeping it as the ISR's last member.
func TestReportOfflineLogDirLastISRMember(t *testing.T) {
	c, _ := newTestController(t, 2, Config{})
	mustCreate(t, c, "t", 1, 2, nil)
	st := mustPart(t, c, "t", 0)
	if _, err := alterISR(c, "t", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1}); err != nil {
		t.Fatal(err)
	}
	c.ReportOfflineLogDir(1, c.BrokerEpoch(1))
	wantState(t, c, "offline", "t", 0, NoLeader, []int32{1}, 1, 2)
	if s := c.Stats(); s.OfflinePartitions != 1 || s.UncleanElections != 0 {
		t.Errorf("stats %+v", s)
	}
}
