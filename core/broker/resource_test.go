package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// TestTooManyOpenFilesIsNotADiskFailure: broker 0 runs out of file descriptors (every open
// of its file system fails with EMFILE). The produce whose batch rolls a segment fails with
// the retriable REQUEST_TIMED_OUT, the HW checkpoint and a new topic's replica cannot be
// written or opened, yet its log directory stays online, the controller keeps it (it still
// leads), and once descriptors are free again the same produce succeeds and the new replica
// is opened.
func TestTooManyOpenFilesIsNotADiskFailure(t *testing.T) {
	cfg := testConfig()
	cfg.Log.SegmentBytes = 4096
	c := newTestCluster(t, 0, cfg)
	efs := vfs.NewErrorFS(vfs.OS)
	c.bases = map[int32]vfs.FS{0: efs}
	for id := int32(0); id < 3; id++ {
		c.addBroker(id)
	}
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	if _, err := c.ctrl.ElectLeader("t", 0, false); err != nil && !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatal(err)
	}
	c.waitFor("broker 0 leads", 10*time.Second, func() bool {
		r, ok := c.broker(0).Replica("t", 0)
		return ok && r.IsLeader()
	})
	b0 := c.broker(0)
	if res := produce(t, b0, -1, "t", 0, batch("a", 5)); res.Err != nil {
		t.Fatal(res.Err)
	}
	var exhausted atomic.Bool
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && exhausted.Load() {
			return syscall.EMFILE
		}
		return nil
	})
	exhausted.Store(true)

	// Produce until a batch needs a new segment.
	var failed ProducePartition
	for i := 0; i < 200; i++ {
		res := produce(t, b0, 1, "t", 0, batch(fmt.Sprint("b", i), 20))
		if res.Err != nil {
			failed = res
			break
		}
	}
	switch err := failed.Err; {
	case err == nil:
		t.Fatal("no produce failed with every open failing: no segment rolled")
	case !errors.Is(err, kerr.RequestTimedOut) || !errors.Is(err, log.ErrTooManyOpenFiles):
		t.Fatalf("produce with no descriptor left: %v, want REQUEST_TIMED_OUT wrapping log.ErrTooManyOpenFiles", err)
	case errors.Is(err, kerr.KafkaStorageError):
		t.Fatalf("produce with no descriptor left: %v wraps KAFKA_STORAGE_ERROR", err)
	}
	if err := b0.WriteHWCheckpoint(); !log.IsResourceError(err) {
		t.Fatalf("HW checkpoint with no descriptor left: %v, want a resource error", err)
	}
	// A topic created meanwhile: broker 0 cannot open its replica.
	if _, err := c.ctrl.CreateTopic("u", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ctrl.Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := b0.Replica("u", 0); ok {
		t.Fatal("replica of u opened with no descriptor left")
	}
	if err := b0.LogDirOffline(); err != nil {
		t.Fatalf("out of descriptors took the log directory offline: %v", err)
	}
	if b0.ResourceErrors() == 0 {
		t.Fatal("the resource errors were not counted")
	}
	if st, _ := c.ctrl.Partition("t", 0); st.Leader != 0 {
		t.Fatalf("leadership moved off broker 0 (%v): the controller fenced it", st)
	}

	exhausted.Store(false)
	if res := produce(t, b0, -1, "t", 0, failed.Records); res.Err != nil {
		t.Fatalf("the same produce once descriptors are free: %v", res.Err)
	}
	if n := b0.RetryResourceFailures(); n != 0 {
		t.Fatalf("%d partitions still wait for a descriptor", n)
	}
	c.waitFor("broker 0 hosts u-0", 10*time.Second, func() bool {
		_, ok := b0.Replica("u", 0)
		return ok
	})
	if err := b0.WriteHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	c.assertReplicasIdentical("t", 0)
	if b0.LogDirOffline() != nil || !strings.Contains(fmt.Sprint(failed.Err), "ulimit -n") {
		t.Fatalf("offline %v; produce error %q does not say what to do", b0.LogDirOffline(), failed.Err)
	}
}

// TestNewOutOfDescriptors: a broker that cannot open its HW checkpoint for want of a file
// descriptor does not start (rather than treat every replica as damaged), and says why.
func TestNewOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	if err := log.WriteCheckpoint(vfs.OS, filepath.Join(dir, HWCheckpointFile), 0, nil); err != nil {
		t.Fatal(err)
	}
	efs := vfs.NewErrorFS(vfs.OS)
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen {
			return syscall.EMFILE
		}
		return nil
	})
	cfg := testConfig()
	cfg.ID, cfg.DataDir, cfg.FS = 0, dir, efs
	b, err := New(cfg, controller.New(controller.Config{}), NewLocalTransport(func(int32) *Broker { return nil }))
	if err == nil {
		b.Close()
		t.Fatal("New with no descriptor left succeeded")
	}
	if !log.IsResourceError(err) || !strings.Contains(err.Error(), "ulimit -n") || errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("New with no descriptor left: %v", err)
	}
}
