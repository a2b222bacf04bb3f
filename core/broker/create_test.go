package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// syncCountFS counts the fsyncs of files and directories, and the syncfs calls, made through
// it.
type syncCountFS struct {
	vfs.FS
	fsyncs, syncfs atomic.Int64
}

func (c *syncCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncCountFile{f, c}, nil
}

func (c *syncCountFS) SyncDir(dir string) error {
	c.fsyncs.Add(1)
	return c.FS.SyncDir(dir)
}

func (c *syncCountFS) SyncFS(dir string) error {
	c.syncfs.Add(1)
	return c.FS.(vfs.FSSyncer).SyncFS(dir)
}

type syncCountFile struct {
	vfs.File
	c *syncCountFS
}

func (f syncCountFile) Sync() error {
	f.c.fsyncs.Add(1)
	return f.File.Sync()
}

// startCreateBroker starts broker 0 (no background goroutines) on fs, with its own
// controller delivering changes from its own goroutine.
func startCreateBroker(t *testing.T, ctrl *controller.Controller, fs vfs.FS, logs *lines) *Broker {
	t.Helper()
	return startCreateBrokerWith(t, ctrl, fs, logs, nil)
}

// startCreateBrokerWith is startCreateBroker with set applied to the broker before it starts.
func startCreateBrokerWith(t *testing.T, ctrl *controller.Controller, fs vfs.FS, logs *lines, set func(*Broker)) *Broker {
	t.Helper()
	cfg := testConfig()
	if logs != nil {
		cfg.Logf = logs.add
	}
	cfg.ID, cfg.DataDir, cfg.FS, cfg.Manual = 0, "/data", fs, true
	cfg.Addr = "127.0.0.1:9092"
	b, err := New(cfg, ctrl, NewLocalTransport(func(int32) *Broker { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(b)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// lines collects log lines. Safe for concurrent use.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(format string, args ...any) {
	l.mu.Lock()
	l.l = append(l.l, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *lines) find(sub string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.l {
		if strings.Contains(s, sub) {
			return s
		}
	}
	return ""
}

func syncCtrl(t *testing.T, ctrl *controller.Controller) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ctrl.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestCreateReplicasOneSyncfs: the replicas of a new topic are created with syncfs calls
// only (at most one per batch of changes, never more than one per replica), no fsync of a
// file or directory, and a crash after the creation keeps every replica directory (here with
// isrbench.partition.metadata.async off, so its partition.metadata too; on, see
// TestPartitionMetadataDeferred).
func TestCreateReplicasOneSyncfs(t *testing.T) {
	mem := vfs.NewStrictMemFS(nil)
	fs := &syncCountFS{FS: mem}
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCreateBrokerWith(t, ctrl, fs, nil, func(b *Broker) { b.cfg.PartitionMetadataAsync = false })
	syncCtrl(t, ctrl)
	fsyncs, syncfs := fs.fsyncs.Load(), fs.syncfs.Load()
	const parts = 50
	if _, err := ctrl.CreateTopic("t", parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	for p := int32(0); p < parts; p++ {
		if r, ok := b.Replica("t", p); !ok || !r.IsLeader() {
			t.Fatalf("t-%d not hosted as leader after the creation", p)
		}
	}
	if n := fs.fsyncs.Load() - fsyncs; n != 0 {
		t.Errorf("creating %d replicas made %d fsyncs of files and directories, want 0 (one syncfs instead)", parts, n)
	}
	if n := fs.syncfs.Load() - syncfs; n < 1 || n > parts {
		t.Errorf("creating %d replicas made %d syncfs calls, want 1 per batch of changes", parts, n)
	}
	crashed := mem.CrashClone()
	for p := 0; p < parts; p++ {
		for _, f := range []string{"", PartitionMetadataFile, "00000000000000000000.log"} {
			path := fmt.Sprintf("/data/t-%d/%s", p, f)
			if _, err := crashed.Stat(path); err != nil {
				t.Fatalf("after a crash following the creation, %s: %v", path, err)
			}
		}
	}
}

// TestCreateReplicasCrashBeforeSyncfs: when the syncfs of a creation fails, none of the new
// replicas is hosted (nothing was served from them) and the log directory goes offline; a
// crash then loses the new directories, and the broker restarted on what the crash left
// opens the replicas as new, empty and undamaged.
func TestCreateReplicasCrashBeforeSyncfs(t *testing.T) {
	mem := vfs.NewStrictMemFS(nil)
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCreateBroker(t, ctrl, mem, nil)
	syncCtrl(t, ctrl)
	eio := errors.New("input/output error")
	mem.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && path == "/data" {
			return eio
		}
		return nil
	})
	if _, err := ctrl.CreateTopic("t", 20, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	for p := int32(0); p < 20; p++ {
		if _, ok := b.Replica("t", p); ok {
			t.Fatalf("t-%d hosted although its creation's syncfs failed", p)
		}
	}
	if err := b.LogDirOffline(); !errors.Is(err, eio) {
		t.Fatalf("log directory after a failed syncfs: %v, want offline with the injected error", err)
	}
	b.Close()
	crashed := mem.CrashClone()
	if _, err := crashed.Stat("/data/t-0"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crash before the syncfs keeps /data/t-0 (%v): its creation was not deferred", err)
	}
	ctrl2 := controller.New(controller.Config{})
	t.Cleanup(ctrl2.Close)
	ctrl2.RegisterBroker(controller.Registration{ID: 0, Host: "127.0.0.1", Port: 9092})
	if _, err := ctrl2.CreateTopic("t", 20, 1, nil); err != nil {
		t.Fatal(err)
	}
	var logs lines
	b2 := startCreateBroker(t, ctrl2, crashed, &logs)
	syncCtrl(t, ctrl2)
	for p := int32(0); p < 20; p++ {
		r, ok := b2.Replica("t", p)
		if !ok || r.LEO() != 0 || r.HW() != 0 {
			t.Fatalf("t-%d after the crash: hosted %v, want a new empty replica", p, ok)
		}
	}
	if l := logs.find("damaged"); l != "" {
		t.Fatalf("a replica reported damaged after a crash before its creation was durable: %s", l)
	}
}

// TestCreateReplicaOverExistingDir: a replica the broker does not host but whose directory
// exists (here a copy of another replica's segment) is not taken for new when its topic's
// creation reaches the broker: it is opened and recovered with its records, next to new
// replicas of the same creation.
func TestCreateReplicaOverExistingDir(t *testing.T) {
	mem := vfs.NewStrictMemFS(nil)
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCreateBroker(t, ctrl, mem, nil)
	syncCtrl(t, ctrl)
	if _, err := ctrl.CreateTopic("t", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	if res := produce(t, b, 1, "t", 0, batch("x", 4)); res.Err != nil {
		t.Fatal(res.Err)
	}
	seg, err := vfs.ReadFile(mem, "/data/t-0/00000000000000000000.log")
	if err != nil || len(seg) == 0 {
		t.Fatalf("t-0's segment: %d bytes, %v", len(seg), err)
	}
	if err := mem.MkdirAll("/data/u-1", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/data/u-1/00000000000000000000.log", seg); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.CreateTopic("u", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	r0, ok0 := b.Replica("u", 0)
	r1, ok1 := b.Replica("u", 1)
	if !ok0 || !ok1 {
		t.Fatalf("hosted u-0 %v, u-1 %v after the creation", ok0, ok1)
	}
	if r0.LEO() != 0 || r1.LEO() != 4 || !r1.IsLeader() {
		t.Fatalf("after the creation u-0 LEO %d, u-1 LEO %d (leader %v); want 0 and u-1's 4 records recovered, leading", r0.LEO(), r1.LEO(), r1.IsLeader())
	}
	if _, err := mem.Stat("/data/u-1/" + PartitionMetadataFile); err != nil {
		t.Fatalf("u-1 opened without its partition.metadata written: %v", err)
	}
}
