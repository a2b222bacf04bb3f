package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// describe is a one-line form of an Update for comparisons.
func describe(u Update) string {
	switch {
	case u.Partition != nil && u.Topic == nil:
		st := u.Partition
		return fmt.Sprintf("%s-%d leader %d isr %v epochs %d/%d", st.Topic, st.Partition, st.Leader, st.ISR, st.LeaderEpoch, st.PartitionEpoch)
	case u.Topic != nil && u.Partition == nil:
		keys := make([]string, 0, len(u.Topic.Configs))
		for k, v := range u.Topic.Configs {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		return fmt.Sprintf("topic %s configs %v deleted %v", u.Topic.Name, keys, u.Topic.Deleted)
	}
	return fmt.Sprintf("BAD update %+v", u)
}

// TestManualDelivery: with Config.ManualDelivery no goroutine delivers; Pending counts what
// is queued for a broker's subscriptions and DeliverPending delivers it on the caller's
// goroutine, at most max at a time, in commit order (initial states first, then partition
// and topic updates as they were committed). A callback may call back into the controller,
// and a change it makes is delivered after the ones before it.
func TestManualDelivery(t *testing.T) {
	c, _ := newTestController(t, 3, Config{ManualDelivery: true})
	mustCreate(t, c, "a", 2, 2, nil) // a-0 [1 2], a-1 [2 3]
	var got []string
	reentered := false
	cancel := c.Subscribe(2, func(u Update) {
		got = append(got, describe(u))
		// Reads and changes from inside the callback: no deadlock, delivered in order.
		if u.Topic != nil && !reentered {
			reentered = true
			st := mustPart(t, c, "a", 0)
			if _, err := alterISR(c, "a", 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{1}); err != nil {
				t.Errorf("AlterPartition from a callback: %v", err)
			}
		}
	})
	defer cancel()
	if n := c.Pending(2); n != 2 {
		t.Fatalf("Pending(2) = %d after subscribing, want the 2 initial states", n)
	}
	if len(got) != 0 {
		t.Fatalf("delivered %v without DeliverPending", got)
	}
	if err := c.AlterTopicConfig("a", map[string]string{ConfigRetentionMs: "1000"}, nil); err != nil {
		t.Fatal(err)
	}
	c.BrokerDown(3)                  // a-1: ISR [2]
	mustCreate(t, c, "b", 1, 1, nil) // [2]: the second topic's placement starts at alive broker index 1
	if n := c.Pending(2); n != 5 {
		t.Fatalf("Pending(2) = %d, want 5", n)
	}
	if n := c.Pending(1); n != 0 {
		t.Fatalf("Pending(1) = %d without a subscription", n)
	}
	if n := c.DeliverPending(2, 2); n != 2 {
		t.Fatalf("DeliverPending(2, 2) = %d", n)
	}
	want := []string{
		"a-0 leader 1 isr [1 2] epochs 0/0",
		"a-1 leader 2 isr [2 3] epochs 0/0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("first delivery %q, want %q", got, want)
	}
	if n := c.Pending(2); n != 3 {
		t.Fatalf("Pending(2) = %d after delivering 2 of 5", n)
	}
	if n := c.DeliverPending(2, 0); n != 4 {
		t.Fatalf("DeliverPending(2, 0) = %d, want the 3 queued and the callback's own change", n)
	}
	want = append(want,
		"topic a configs [retention.ms=1000] deleted false",
		"a-1 leader 2 isr [2] epochs 0/1",
		"b-0 leader 2 isr [2] epochs 0/0",
		"a-0 leader 1 isr [1] epochs 0/1", // made by the callback while delivering the topic update
	)
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := c.Pending(2); n != 0 || c.DeliverPending(2, 0) != 0 {
		t.Fatalf("Pending(2) = %d after delivering everything", n)
	}
}

// TestManualDeliveryCancelAndSeveralSubscriptions: every subscription of a broker gets every
// change (Pending and DeliverPending count over all of them); a cancelled one is dropped with
// its queue and gets nothing later; after Close nothing is delivered.
func TestManualDeliveryCancelAndSeveralSubscriptions(t *testing.T) {
	c, _ := newTestController(t, 2, Config{ManualDelivery: true})
	var first, second []string
	cancel1 := c.Subscribe(1, func(u Update) { first = append(first, describe(u)) })
	cancel2 := c.Subscribe(1, func(u Update) { second = append(second, describe(u)) })
	defer cancel2()
	mustCreate(t, c, "t", 1, 2, nil)
	if n := c.Pending(1); n != 2 {
		t.Fatalf("Pending(1) = %d, want one change queued per subscription", n)
	}
	cancel1()
	if n := c.Pending(1); n != 1 {
		t.Fatalf("Pending(1) = %d after a cancel, want the other subscription's 1", n)
	}
	st := mustPart(t, c, "t", 0)
	if _, err := alterISR(c, "t", 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader}); err != nil {
		t.Fatal(err)
	}
	if n := c.DeliverPending(1, 0); n != 2 {
		t.Fatalf("DeliverPending(1, 0) = %d, want 2 (the cancelled subscription delivers nothing)", n)
	}
	if len(first) != 0 || len(second) != 2 {
		t.Fatalf("cancelled got %q, live got %q", first, second)
	}
	cancel1() // idempotent
	c.Close()
	mustCreate(t, c, "u", 1, 2, nil)
	if n := c.DeliverPending(1, 0); n != 0 {
		t.Fatalf("DeliverPending after Close = %d", n)
	}
	if cancel := c.Subscribe(1, func(Update) { t.Error("delivery after Close") }); c.DeliverPending(1, 0) != 0 {
		t.Fatal("a subscription after Close delivered")
	} else {
		cancel()
	}
}

// TestDeliverPendingNeedsManualDelivery: DeliverPending on a controller with delivery
// goroutines is a programmer error.
func TestDeliverPendingNeedsManualDelivery(t *testing.T) {
	c, _ := newTestController(t, 1, Config{})
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.HasPrefix(s, "BUG:") {
			t.Fatalf("recovered %v, want a BUG panic", r)
		}
	}()
	c.DeliverPending(1, 0)
}
