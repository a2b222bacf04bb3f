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
	"github.com/twmb/franz-go/pkg/kerr"
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

// TestMetadataWriteFailureRefuses: when the metadata log cannot be written (a failed fsync,
// a full disk) the change is refused with ErrMetadataLog (KAFKA_STORAGE_ERROR on the wire),
// rolled back and delivered to nobody; it is said loudly once; nothing of it survives a
// restart. When writes work again the next change writes a new generation first and goes
// through.
func TestMetadataWriteFailureRefuses(t *testing.T) {
	for _, fault := range []string{"fsync", "write", "disk full"} {
		t.Run(fault, func(t *testing.T) {
			clk := &fakeClock{}
			mem := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
			efs := vfs.NewErrorFS(mem)
			var mu sync.Mutex
			var logged []string
			c, _, err := Open(Config{Dir: "/m", FS: efs, Now: clk.Now, ManualDelivery: true, Logf: func(f string, a ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(f, a...))
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for id := int32(1); id <= 3; id++ {
				mustRegister(t, c, Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
			}
			mustCreate(t, c, "t", 1, 3, map[string]string{ConfigMinInsyncReplicas: "2"})
			var got []Update
			cancel := c.Subscribe(2, func(u Update) { got = append(got, u) })
			defer cancel()
			c.DeliverPending(2, 0)
			got = nil
			before := stateOf(c)
			switch fault {
			case "disk full":
				mem.SetCapacity(mem.Used())
			default:
				op := vfs.OpSync
				if fault == "write" {
					op = vfs.OpWrite
				}
				efs.SetInjector(func(o vfs.Op, path string) error {
					if o == op {
						return syscall.EIO
					}
					return nil
				})
			}
			if c.MetadataLogError() != nil {
				t.Fatal("MetadataLogError before any failure")
			}
			// Each kind of change is refused and undone: a create, an ISR shrink, a
			// fencing, a config change, a registration.
			if _, err := c.CreateTopic("u", 1, 3, nil); !errors.Is(err, ErrMetadataLog) || !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("CreateTopic = %v, want ErrMetadataLog", err)
			}
			st := mustPart(t, c, "t", 0)
			if got, err := alterISR(c, "t", 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader, st.ISR[1]}); !errors.Is(err, ErrMetadataLog) || got.String() != st.String() {
				t.Fatalf("AlterPartition = %v, %v; want ErrMetadataLog and the current state %v", got, err, st)
			}
			c.BrokerDown(st.Leader)
			if err := c.AlterTopicConfig("t", map[string]string{ConfigRetentionMs: "1000"}, nil); !errors.Is(err, ErrMetadataLog) {
				t.Fatalf("AlterTopicConfig = %v", err)
			}
			if _, err := c.RegisterBroker(Registration{ID: 3, Host: "127.0.0.1", Port: 9093}); !errors.Is(err, ErrMetadataLog) {
				t.Fatalf("RegisterBroker = %v", err)
			}
			if _, err := c.RegisterBroker(Registration{ID: 7, Host: "127.0.0.1", Port: 9097}); !errors.Is(err, ErrMetadataLog) {
				t.Fatalf("RegisterBroker of a new broker = %v", err)
			}
			diffState(t, "after refused changes", stateOf(c), before)
			if n := c.Pending(2); n != 0 || len(got) != 0 {
				t.Errorf("%d changes pending, %d delivered while the metadata log failed", n, len(got))
			}
			if s := c.Stats(); s.MetadataWriteFailures != 6 || s.MetadataLogError == "" || s.Elections != 0 {
				t.Errorf("Stats %+v: want 6 refused changes, the error, no election counted", s)
			}
			mu.Lock()
			loud := 0
			for _, l := range logged {
				if strings.Contains(l, "CANNOT BE WRITTEN") && strings.Contains(l, "/m") {
					loud++
				}
			}
			mu.Unlock()
			if loud != 1 {
				t.Errorf("logged %q: want the failure said loudly once", logged)
			}
			// Nothing refused survives a power loss either.
			lost, _, err := Open(Config{Dir: "/m", FS: mem.CrashClone(), Now: clk.Now, Logf: t.Logf})
			if err != nil {
				t.Fatalf("open after a power loss: %v", err)
			}
			diffState(t, "after a power loss", stateOf(lost), before.reloaded())
			lost.Close()

			// Writes work again: the next change goes through, in a new generation.
			mem.SetCapacity(0)
			efs.SetInjector(nil)
			mustCreate(t, c, "u", 1, 3, nil)
			if c.MetadataLogError() != nil || c.Pending(2) == 0 {
				t.Errorf("after writes work again: error %v, %d pending", c.MetadataLogError(), c.Pending(2))
			}
			mu.Lock()
			if last := logged[len(logged)-1]; !strings.Contains(last, "can be written again") {
				t.Errorf("last log line %q: want the resumption said", last)
			}
			mu.Unlock()
			after, _, err := Open(Config{Dir: "/m", FS: mem.CrashClone(), Now: clk.Now, Logf: t.Logf})
			if err != nil {
				t.Fatalf("open after resuming: %v", err)
			}
			defer after.Close()
			if !slices.Equal(after.Topics(), []string{"t", "u"}) {
				t.Errorf("after resuming and a power loss: topics %v", after.Topics())
			}
		})
	}
}

// mustRegister registers a broker and returns its epoch.
func mustRegister(t testing.TB, c *Controller, reg Registration) int64 {
	t.Helper()
	e, err := c.RegisterBroker(reg)
	if err != nil {
		t.Fatalf("register broker %d: %v", reg.ID, err)
	}
	return e
}

// TestMetadataClosedRefuses: after Close, a controller with a metadata log refuses changes
// (they could not be persisted) instead of making them in memory only.
func TestMetadataClosedRefuses(t *testing.T) {
	clk := &fakeClock{}
	c, _, err := Open(Config{Dir: "/m", FS: vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) }), Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	mustRegister(t, c, Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	c.Close()
	if _, err := c.CreateTopic("t", 1, 1, nil); !errors.Is(err, ErrMetadataLog) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("CreateTopic after Close = %v, want ErrMetadataLog", err)
	}
	if got := c.Topics(); len(got) != 0 {
		t.Errorf("topics %v after a refused create", got)
	}
}
