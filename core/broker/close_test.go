package broker

import (
	"fmt"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// TestCloseSyncFS: with isrbench.close.syncfs a clean Close of a broker with many replicas
// makes no fsync of a file or directory, only two syncfs calls, and a crash right after it
// keeps every acknowledged record, every checkpoint (no replica is reported damaged) and the
// producer snapshots; with the switch off, Close fsyncs as it goes and calls no syncfs.
func TestCloseSyncFS(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("close.syncfs=%v", on), func(t *testing.T) {
			const parts = 20
			mem := vfs.NewStrictMemFS(nil)
			fs := &syncCountFS{FS: mem}
			ctrl, b := startCloseBrokerWithTopic(t, fs, on, parts)
			b.WritePendingPartitionMetadata() // the new replicas' partition.metadata: not Close's syncfs
			fsyncs, syncfs := fs.fsyncs.Load(), fs.syncfs.Load()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			df, ds := fs.fsyncs.Load()-fsyncs, fs.syncfs.Load()-syncfs
			if on && (df != 0 || ds != 2) {
				t.Errorf("Close of %d replicas made %d fsyncs and %d syncfs, want 0 and 2", parts, df, ds)
			}
			if !on && (df < parts || ds != 0) {
				t.Errorf("Close of %d replicas with close.syncfs off made %d fsyncs and %d syncfs, want >= %d and 0", parts, df, ds, parts)
			}
			crashed := mem.CrashClone()
			var logs lines
			b2 := startCloseBroker(t, ctrl, crashed, on, &logs)
			for p := int32(0); p < parts; p++ {
				r, ok := b2.Replica("t", p)
				if !ok || r.LEO() != 3 {
					t.Fatalf("t-%d after a crash following Close: hosted %v, want its 3 records", p, ok)
				}
				if r.HW() != 3 {
					t.Errorf("t-%d after a crash following Close: HW %d, want 3 from the checkpoint", p, r.HW())
				}
			}
			for _, bad := range []string{"damaged", "recovery"} {
				if l := logs.find(bad); l != "" {
					t.Errorf("restart after a crash following a clean Close logged: %s", l)
				}
			}
		})
	}
}

// startCloseBrokerWithTopic starts a controller and broker 0 on fs (startCloseBroker), creates
// topic t with parts partitions, RF 1, and produces 3 records to each.
func startCloseBrokerWithTopic(t *testing.T, fs vfs.FS, on bool, parts int32) (*controller.Controller, *Broker) {
	t.Helper()
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCloseBroker(t, ctrl, fs, on, nil)
	syncCtrl(t, ctrl)
	if _, err := ctrl.CreateTopic("t", parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	for p := int32(0); p < parts; p++ {
		if res := produce(t, b, 1, "t", p, batch(fmt.Sprint(p), 3)); res.Err != nil {
			t.Fatalf("produce t-%d: %v", p, res.Err)
		}
	}
	return ctrl, b
}

// startCloseBroker is startCreateBroker with isrbench.close.syncfs set to on and
// isrbench.leader.epoch.checkpoint.async on.
func startCloseBroker(t *testing.T, ctrl *controller.Controller, fs vfs.FS, on bool, logs *lines) *Broker {
	t.Helper()
	cfg := testConfig()
	if logs != nil {
		cfg.Logf = logs.add
	}
	cfg.ID, cfg.DataDir, cfg.FS, cfg.Manual, cfg.CloseSyncFS = 0, "/data", fs, true, on
	// Leader-epoch checkpoint writes queued and never run before Close: Close writes them,
	// as durably as the rest (isrbench.leader.epoch.checkpoint.async).
	cfg.EpochCheckpointAsync = true
	cfg.Addr = "127.0.0.1:9092"
	b, err := New(cfg, ctrl, NewLocalTransport(func(int32) *Broker { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
