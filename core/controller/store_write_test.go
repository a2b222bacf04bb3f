package controller

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
)

// TestMetadataDurableBeforeDelivery: a change is in the metadata log, fsynced, before any
// subscriber hears of it: a power loss between the change and its delivery keeps it.
func TestMetadataDurableBeforeDelivery(t *testing.T) {
	clk := &fakeClock{}
	fs := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
	c, _, err := Open(Config{Dir: "/m", FS: fs, Now: clk.Now, ManualDelivery: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for id := int32(1); id <= 2; id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	var got []Update
	cancel := c.Subscribe(2, func(u Update) { got = append(got, u) })
	defer cancel()
	check := func(what string, cond func(c *Controller) bool) {
		t.Helper()
		if n := c.Pending(2); n == 0 {
			t.Fatalf("%s: nothing pending for broker 2", what)
		}
		lost, _, err := Open(Config{Dir: "/m", FS: fs.CrashClone(), Now: clk.Now, Logf: t.Logf})
		if err != nil {
			t.Fatalf("%s: open after a power loss: %v", what, err)
		}
		defer lost.Close()
		if !cond(lost) {
			t.Errorf("%s: pending for broker 2 but lost by a power loss", what)
		}
		c.DeliverPending(2, 0)
	}
	mustCreate(t, c, "t", 1, 2, nil)
	check("topic creation", func(l *Controller) bool { _, ok := l.Partition("t", 0); return ok })
	st := mustPart(t, c, "t", 0)
	if _, err := alterISR(c, "t", 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader}); err != nil {
		t.Fatal(err)
	}
	check("ISR shrink", func(l *Controller) bool { s, _ := l.Partition("t", 0); return len(s.ISR) == 1 })
	if err := c.AlterTopicConfig("t", map[string]string{ConfigRetentionMs: "1000"}, nil); err != nil {
		t.Fatal(err)
	}
	check("config change", func(l *Controller) bool { return l.TopicConfig("t")[ConfigRetentionMs] == "1000" })
	if len(got) != 3 {
		t.Errorf("delivered %d updates, want 3", len(got))
	}
}

// TestMetadataDurableBeforeCallback: with delivery goroutines too, a subscriber never hears
// of a change that a power loss at that moment would lose. Each fsync of the metadata log
// lets the delivery goroutine run first, so a change handed out before its fsync would be
// seen by a callback before it is durable.
func TestMetadataDurableBeforeCallback(t *testing.T) {
	clk := &fakeClock{}
	mem := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
	efs := vfs.NewErrorFS(mem)
	c, _, err := Open(Config{Dir: "/m", FS: efs, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			for i := 0; i < 100; i++ {
				runtime.Gosched()
			}
		}
		return nil
	})
	var mu sync.Mutex
	var bad []string
	seen := 0
	cancel := c.Subscribe(2, onPartition(func(st PartitionState) {
		lost, _, err := Open(Config{Dir: "/m", FS: mem.CrashClone(), Now: clk.Now, Logf: t.Logf})
		mu.Lock()
		defer mu.Unlock()
		seen++
		if err != nil {
			bad = append(bad, err.Error())
			return
		}
		defer lost.Close()
		got, ok := lost.Partition(st.Topic, st.Partition)
		if !ok || got.PartitionEpoch < st.PartitionEpoch {
			bad = append(bad, fmt.Sprintf("delivered %v, a power loss keeps %v (exists %v)", st, got, ok))
		}
	}))
	defer cancel()
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("t%d", i)
		mustCreate(t, c, name, 1, 3, nil)
		st := mustPart(t, c, name, 0)
		if _, err := alterISR(c, name, 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Sync(syncCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 40 {
		t.Errorf("broker 2 saw %d changes, want 40", seen)
	}
	if len(bad) > 0 {
		t.Errorf("%d changes delivered before they were durable, e.g. %s", len(bad), bad[0])
	}
}

// TestMetadataStoreError: a metadata log that cannot be written (fsync fails) is reported
// once through Logf and by StoreError; the controller keeps working in memory.
func TestMetadataStoreError(t *testing.T) {
	clk := &fakeClock{}
	efs := vfs.NewErrorFS(vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) }))
	var mu sync.Mutex
	var logged []string
	c, _, err := Open(Config{Dir: "/m", FS: efs, Now: clk.Now, Logf: func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	if err := c.StoreError(); err != nil {
		t.Fatalf("StoreError before any failure: %v", err)
	}
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	mustCreate(t, c, "t", 1, 1, nil)
	mustCreate(t, c, "u", 1, 1, nil)
	err = c.StoreError()
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("StoreError = %v, want the fsync's EIO", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "no longer durable") || !strings.Contains(logged[0], "/m") {
		t.Errorf("logged %q, want one line saying the metadata is no longer durable", logged)
	}
	if got := c.Topics(); !slices.Equal(got, []string{"t", "u"}) {
		t.Errorf("topics %v: the controller must keep working in memory", got)
	}
}

// StoreError returns the first error writing the metadata log, or nil.
func (c *Controller) StoreError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.storeErr
}
