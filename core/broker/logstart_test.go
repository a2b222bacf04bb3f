package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// TestFollowerLogStartFollowsLeader: the leader deletes old segments by retention; its next
// fetch responses carry its new log start and each follower advances its own to it (Kafka's
// maybeIncrementLogStartOffset on every fetch response), deleting its whole segments below
// it, although its segments are cut elsewhere (a larger segment size). After a failover the
// new leader starts where the old one did: earliest is that log start and a consumer fetch
// below it is OFFSET_OUT_OF_RANGE. It used to keep every offset the old leader had deleted,
// and served them again.
func TestFollowerLogStartFollowsLeader(t *testing.T) {
	cfg := testConfig()
	cfg.Log.SegmentBytes = 1024
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	var followers []*Broker
	for _, id := range c.ids() {
		if id == l.ID() {
			continue
		}
		followers = append(followers, c.broker(id))
		// The followers cut their segments elsewhere, so the leader's log start falls
		// inside one of theirs.
		if err := c.ctrl.ChangeBrokerConfig(fmt.Sprint(id), controller.ConfigChange{Set: map[string]string{"log.segment.bytes": "3000"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ctrl.ChangeBrokerConfig(fmt.Sprint(l.ID()), controller.ConfigChange{Set: map[string]string{"log.retention.bytes": "2048"}}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("broker configs applied", 10*time.Second, func() bool {
		if h := l.lookup("t", 0); h == nil || h.l.Config().RetentionBytes != 2048 {
			return false
		}
		for _, f := range followers {
			if h := f.lookup("t", 0); h == nil || h.l.Config().SegmentBytes != 3000 {
				return false
			}
		}
		return true
	})
	for i := 0; i < 40; i++ {
		if res := produce(t, l, -1, "t", 0, batch(fmt.Sprintf("r%d", i), 5)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := l.ApplyRetention(); n == 0 {
		t.Fatal("retention deleted nothing on the leader")
	}
	lr, _ := l.Replica("t", 0)
	start := lr.LogStart()
	// The next acks=all record is acknowledged once both followers fetched past it, so
	// both applied a response carrying the new log start.
	if res := produce(t, l, -1, "t", 0, batch("after", 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.waitFor("the followers' log starts follow the leader's", 10*time.Second, func() bool {
		for _, f := range followers {
			if r, _ := f.Replica("t", 0); r.LogStart() != start {
				return false
			}
		}
		return true
	})
	for _, f := range followers {
		h := f.lookup("t", 0)
		if _, err := h.r.Read(start-1, start, 1<<20, true); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Errorf("follower %d still reads offset %d below the log start %d: %v", f.ID(), start-1, start, err)
		}
		// Its segments are cut elsewhere: the log start lies inside one, and is checkpointed.
		if _, err := os.Stat(filepath.Join(h.l.Dir(), log.LogStartFile)); err != nil {
			t.Errorf("follower %d: log start %d inside a segment not checkpointed: %v", f.ID(), start, err)
		}
	}

	l.Kill()
	c.ctrl.BrokerDown(l.ID())
	var nl *Broker
	c.waitFor("a follower leads", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		if st.Leader < 0 || st.Leader == l.ID() {
			return false
		}
		r, ok := c.broker(st.Leader).Replica("t", 0)
		nl = c.broker(st.Leader)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
	})
	if got, err := nl.ListOffset("t", 0, -2, 0); err != nil || got != start {
		t.Fatalf("new leader %d: earliest %d, %v; want the old leader's log start %d", nl.ID(), got, err, start)
	}
	for _, off := range []int64{0, start - 1} {
		if _, _, err := consumerFetch(t, nl, "t", 0, off); !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Errorf("new leader %d: consumer fetch at %d below the log start %d: %v, want OFFSET_OUT_OF_RANGE", nl.ID(), off, start, err)
		}
	}
	if vals, _ := consume(t, nl, "t", 0, start); len(vals) < int(200-start) || vals[0] != fmt.Sprintf("r%d-0", start/5) {
		t.Errorf("new leader %d serves %d records from the log start %d (%.1v), want at least %d from r%d-0", nl.ID(), len(vals), start, vals, 200-start, start/5)
	}
}
