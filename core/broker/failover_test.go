package broker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDivergentLeaderTruncatesOnRestart is the KIP-101 scenario: the old
// leader appended records (acks=1) its followers never fetched, was killed,
// and a new leader wrote different records at the same offsets. On restart
// the old leader must truncate its divergent suffix (by leader epoch; the
// "hw" ablation truncates to its HW) and end with the new leader's log.
func TestDivergentLeaderTruncatesOnRestart(t *testing.T) {
	for _, mode := range []string{"epoch", "hw"} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig()
			cfg.TruncateMode = mode
			cfg.ReplicaLagTimeMaxMs = 60000
			c := newTestCluster(t, 3, cfg)
			c.createTopic("t", 1, 3, nil)
			old := c.leader("t", 0)
			if res := produce(t, old, -1, "t", 0, batch("a", 5)); res.Err != nil {
				t.Fatal(res.Err)
			}
			var followers []*Broker
			for _, id := range c.ids() {
				if id != old.ID() {
					followers = append(followers, c.broker(id))
				}
			}
			for _, f := range followers {
				f.Pause()
			}
			if res := produce(t, old, 1, "t", 0, batch("x", 3)); res.Err != nil || res.BaseOffset != 5 {
				t.Fatalf("acks=1 on old leader: %+v", res)
			}
			old.Kill()
			c.ctrl.BrokerDown(old.ID())
			for _, f := range followers {
				f.Resume()
			}
			var nl *Broker
			c.waitFor("new leader", 10*time.Second, func() bool {
				st, _ := c.ctrl.Partition("t", 0)
				if st.Leader < 0 || st.Leader == old.ID() {
					return false
				}
				r, ok := c.broker(st.Leader).Replica("t", 0)
				nl = c.broker(st.Leader)
				return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
			})
			if res := produce(t, nl, -1, "t", 0, batch("b", 4)); res.Err != nil || res.BaseOffset != 5 {
				t.Fatalf("acks=all on new leader: %+v", res)
			}
			restarted := c.start(old.ID())
			c.waitFor("old leader back in ISR and caught up", 10*time.Second, func() bool {
				r, ok := restarted.Replica("t", 0)
				return ok && len(isrOf(c, "t", 0)) == 3 && r.LEO() == 9
			})
			c.assertReplicasIdentical("t", 0)
			h := restarted.lookup("t", 0)
			data, err := h.l.Bytes(0, 9)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "x-0") || !strings.Contains(string(data), "b-3") {
				t.Fatalf("restarted replica kept the divergent records or lacks the new ones")
			}
			vals, _ := consume(t, nl, "t", 0, 0)
			want := []string{"a-0", "a-1", "a-2", "a-3", "a-4", "b-0", "b-1", "b-2", "b-3"}
			if !slices.Equal(vals, want) {
				t.Fatalf("new leader log %v, want %v", vals, want)
			}
		})
	}
}

// TestCrashedFollowerRecovers: a follower loses everything not fsynced
// (flush.messages never: all of it), restarts, recovers and catches up.
func TestCrashedFollowerRecovers(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	for i := 0; i < 5; i++ {
		if res := produce(t, l, -1, "t", 0, batch("c", 10)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	var f *Broker
	for _, id := range c.ids() {
		if id != l.ID() {
			f = c.broker(id)
			break
		}
	}
	f.Crash()
	c.ctrl.BrokerDown(f.ID())
	c.waitFor("ISR without the crashed follower", 10*time.Second, func() bool { return len(isrOf(c, "t", 0)) == 2 })
	if res := produce(t, l, -1, "t", 0, batch("d", 10)); res.Err != nil {
		t.Fatal(res.Err)
	}
	nf := c.start(f.ID())
	c.waitFor("crashed follower caught up and back in ISR", 10*time.Second, func() bool {
		r, ok := nf.Replica("t", 0)
		return ok && r.LEO() == 60 && len(isrOf(c, "t", 0)) == 3
	})
	c.assertReplicasIdentical("t", 0)
}
