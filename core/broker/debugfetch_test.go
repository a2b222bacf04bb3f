package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDebuggingConsumerFetch: the debugging replica id -2 (ReplicaVerificationTool's) reads
// a follower's log as well as the leader's, each bounded by that replica's own HW, with the
// epoch fencing of any fetch; a plain consumer (-1) is still refused by a follower.
func TestDebuggingConsumerFetch(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	for i := 0; i < 3; i++ {
		if res := produce(t, l, -1, "t", 0, batch("v", 10)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	st, _ := c.ctrl.Partition("t", 0)
	var f *Broker
	for _, id := range st.Replicas {
		if id != st.Leader {
			f = c.broker(id)
			break
		}
	}
	fr, _ := f.Replica("t", 0)
	c.waitFor("the follower's HW at 30", 10*time.Second, func() bool { return fr.HW() == 30 })
	fetch := func(b *Broker, replicaID int32, off int64, epoch int32) FetchPartition {
		req := &FetchRequest{ReplicaID: replicaID, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
			Topic: "t", FetchOffset: off, CurrentLeaderEpoch: epoch, LogStartOffset: -1, MaxBytes: 1 << 20,
		}}}
		b.Fetch(context.Background(), req)
		p := req.Partitions[0]
		p.Records.Release()
		return p
	}
	if got := fetch(f, -1, 0, -1); !errors.Is(got.Err, kerr.NotLeaderForPartition) {
		t.Errorf("consumer fetch from a follower: %v, want NOT_LEADER_OR_FOLLOWER", got.Err)
	}
	for _, b := range []*Broker{l, f} {
		got := fetch(b, -2, 0, -1)
		if got.Err != nil || got.HighWatermark != 30 || got.Records.NextOffset != 30 || got.Records.Size == 0 {
			t.Errorf("debugging fetch from broker %d: err %v, HW %d, records up to %d (%d bytes); want [0, 30)", b.ID(), got.Err, got.HighWatermark, got.Records.NextOffset, got.Records.Size)
		}
	}
	if got := fetch(f, -2, 31, -1); !errors.Is(got.Err, kerr.OffsetOutOfRange) {
		t.Errorf("debugging fetch past the follower's LEO: %v, want OFFSET_OUT_OF_RANGE", got.Err)
	}
	if got := fetch(f, -2, 0, st.LeaderEpoch+1); !errors.Is(got.Err, kerr.UnknownLeaderEpoch) {
		t.Errorf("debugging fetch with a future leader epoch: %v, want UNKNOWN_LEADER_EPOCH", got.Err)
	}
}
