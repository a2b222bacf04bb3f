package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDeleteRecords: the leader's log start moves to the requested offset and the call
// returns once every alive follower has followed it (the low watermark); consumers below it
// get OFFSET_OUT_OF_RANGE; -1 means the HW; offsets above the HW, below -1, or sent to a
// follower are refused; a follower that does not fetch keeps the low watermark down until the
// request times out, and a fenced one is not waited for.
func TestDeleteRecords(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("dr", 1, 3, nil)
	l := c.leader("dr", 0)
	for i := 0; i < 5; i++ {
		if res := produce(t, l, -1, "dr", 0, batch("v", 4)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lw, err := l.DeleteRecords(ctx, "dr", 0, 6) // inside the second batch
	if err != nil || lw != 6 {
		t.Fatalf("DeleteRecords(6): low watermark %d, %v; want 6", lw, err)
	}
	for _, id := range c.ids() {
		r, _ := c.broker(id).Replica("dr", 0)
		if r.LogStart() != 6 {
			t.Errorf("broker %d: log start %d after DeleteRecords returned, want 6", id, r.LogStart())
		}
	}
	if _, _, err := consumerFetch(t, l, "dr", 0, 5); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Errorf("consumer fetch below the low watermark: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	if vals, _ := consume(t, l, "dr", 0, 6); len(vals) != 14 || vals[0] != "v-2" {
		t.Errorf("consume from 6: %v", vals)
	}
	if off, _, err := l.ListOffsetFor(-1, -1, "dr", 0, -2, 0); err != nil || off != 6 {
		t.Errorf("ListOffsets EARLIEST: %d %v, want 6", off, err)
	}
	// An offset below the log start changes nothing and answers the low watermark.
	if lw, err := l.DeleteRecords(ctx, "dr", 0, 3); err != nil || lw != 6 {
		t.Errorf("DeleteRecords(3) below the log start: %d %v, want 6", lw, err)
	}
	for _, tc := range []struct {
		offset int64
		want   error
	}{{21, kerr.OffsetOutOfRange}, {-2, kerr.OffsetOutOfRange}} {
		if _, err := l.DeleteRecords(ctx, "dr", 0, tc.offset); !errors.Is(err, tc.want) {
			t.Errorf("DeleteRecords(%d): %v, want %v", tc.offset, err, tc.want)
		}
	}
	var follower *Broker
	for _, id := range c.ids() {
		if b := c.broker(id); b != l {
			follower = b
			break
		}
	}
	if _, err := follower.DeleteRecords(ctx, "dr", 0, 8); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("DeleteRecords on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if _, err := l.DeleteRecords(ctx, "nope", 0, 1); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("DeleteRecords of an unknown partition: %v", err)
	}
	// A paused (alive, not fetching) follower holds the low watermark: the request times out,
	// the leader's log start has moved.
	follower.Pause()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	lw, err = l.DeleteRecords(short, "dr", 0, 10)
	cancelShort()
	if !errors.Is(err, kerr.RequestTimedOut) || lw != 6 {
		t.Errorf("DeleteRecords with a paused follower: %d %v, want low watermark 6 and REQUEST_TIMED_OUT", lw, err)
	}
	if r, _ := l.Replica("dr", 0); r.LogStart() != 10 {
		t.Errorf("leader log start %d, want 10", r.LogStart())
	}
	// Fenced, it is not waited for; -1 deletes up to the HW.
	c.ctrl.BrokerDown(follower.ID())
	if lw, err := l.DeleteRecords(ctx, "dr", 0, -1); err != nil || lw != 20 {
		t.Errorf("DeleteRecords(-1) with the follower fenced: %d %v, want 20", lw, err)
	}
	follower.Resume()
}
