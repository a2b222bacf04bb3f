package controller

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestSubscribeBatch: a batch subscriber gets every change exactly once, in change order,
// with the partitions of one topic creation queued together delivered in one call (the
// callback is blocked while they are queued); Sync waits for the batch.
func TestSubscribeBatch(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "first", 1, 3, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	var got []PartitionState
	entered := make(chan struct{}, 1)
	cancel := c.SubscribeBatch(1, func(us []Update) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(us))
		for _, u := range us {
			if u.Partition != nil {
				got = append(got, *u.Partition)
			}
		}
	})
	defer cancel()
	select { // the subscription's first batch (topic "first") is being delivered
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("no delivery within a minute")
	}
	mustCreate(t, c, "many", 50, 3, nil) // queued while the callback is blocked
	close(release)
	ctx, done := context.WithTimeout(context.Background(), time.Minute)
	defer done()
	if err := c.Sync(ctx, 1); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 51 || got[0].Topic != "first" {
		t.Fatalf("got %d partition changes (batches %v), want 51 starting with first-0", len(got), sizes)
	}
	for i, st := range got[1:] {
		if st.Topic != "many" || st.Partition != int32(i) {
			t.Fatalf("change %d is %s-%d, want many-%d (in order, once)", i+1, st.Topic, st.Partition, i)
		}
	}
	if len(sizes) != 2 || sizes[1] != 50 {
		t.Fatalf("batches %v, want [1 50]", sizes)
	}
}
