package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

func readTopicID(t *testing.T, fsys vfs.FS, path string) (controller.TopicID, error) {
	t.Helper()
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return controller.TopicID{}, err
	}
	id, ok := parsePartitionMetadata(data)
	if !ok {
		return controller.TopicID{}, fmt.Errorf("%s does not parse: %q", path, data)
	}
	return id, nil
}

// The tests drive the writer by hand (Config.Manual: WritePendingPartitionMetadata);
// cluster tests run it as the goroutine it is in a broker that is not Manual.

// TestPartitionMetadataDeferred: with isrbench.partition.metadata.async the replicas of a new
// topic are hosted before their partition.metadata is written; a crash in that window keeps
// every directory and segment (the topic is not lost) and the restarted broker writes the
// files with the controller's topic id; the writer then writes every file with one syncfs
// and no fsync, durable across a crash.
func TestPartitionMetadataDeferred(t *testing.T) {
	mem := vfs.NewStrictMemFS(nil)
	cfs := &syncCountFS{FS: mem}
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCreateBrokerWith(t, ctrl, cfs, nil, func(b *Broker) { b.cfg.PartitionMetadataAsync = true })
	syncCtrl(t, ctrl)
	fsyncs, syncfs := cfs.fsyncs.Load(), cfs.syncfs.Load()
	const parts = 30
	if _, err := ctrl.CreateTopic("t", parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	id, ok := ctrl.TopicID("t")
	if !ok {
		t.Fatal("no topic id for t")
	}
	for p := int32(0); p < parts; p++ {
		if r, ok := b.Replica("t", p); !ok || !r.IsLeader() {
			t.Fatalf("t-%d not hosted as leader after the creation", p)
		}
		if _, err := mem.Stat(fmt.Sprintf("/data/t-%d/%s", p, PartitionMetadataFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("t-%d's partition.metadata before the writer ran: %v, want none (deferred)", p, err)
		}
	}
	if res := produce(t, b, 1, "t", 0, batch("x", 4)); res.Err != nil {
		t.Fatal(res.Err)
	}

	// A crash before the writer: every replica's directory and segment survive.
	early := mem.CrashClone()
	for p := 0; p < parts; p++ {
		for _, f := range []string{"", "00000000000000000000.log"} {
			if _, err := early.Stat(fmt.Sprintf("/data/t-%d/%s", p, f)); err != nil {
				t.Fatalf("after a crash before the partition.metadata writer: %v", err)
			}
		}
	}

	// The writer: every file written, with one syncfs and no fsync, durable.
	beforeWriter := cfs.syncfs.Load()
	if n := b.WritePendingPartitionMetadata(); n != parts {
		t.Fatalf("the writer wrote %d partition.metadata files, want %d", n, parts)
	}
	if n := cfs.fsyncs.Load() - fsyncs; n != 0 {
		t.Errorf("creating %d replicas and writing their partition.metadata made %d fsyncs, want 0", parts, n)
	}
	if n := beforeWriter - syncfs; n < 1 || n > parts {
		t.Errorf("creating %d replicas made %d syncfs calls, want 1 per batch of changes", parts, n)
	}
	if n := cfs.syncfs.Load() - beforeWriter; n != 1 {
		t.Errorf("writing %d partition.metadata files made %d syncfs calls, want 1", parts, n)
	}
	late := mem.CrashClone()
	for p := 0; p < parts; p++ {
		path := fmt.Sprintf("/data/t-%d/%s", p, PartitionMetadataFile)
		if got, err := readTopicID(t, late, path); err != nil || got != id {
			t.Fatalf("after a crash following the writer, %s holds %v (%v), want %v", path, got, err, id)
		}
	}

	// The broker restarted on what the early crash left hosts every replica, undamaged, and
	// writes the missing files with the topic's id.
	b.Close()
	var logs lines
	b2 := startCreateBrokerWith(t, ctrl, early, &logs, func(b *Broker) { b.cfg.PartitionMetadataAsync = true })
	syncCtrl(t, ctrl)
	for p := int32(0); p < parts; p++ {
		if _, ok := b2.Replica("t", p); !ok {
			t.Fatalf("t-%d not hosted after the restart on a crash before its partition.metadata", p)
		}
		path := fmt.Sprintf("/data/t-%d/%s", p, PartitionMetadataFile)
		if got, err := readTopicID(t, early, path); err != nil || got != id {
			t.Fatalf("after the restart %s holds %v (%v), want %v", path, got, err, id)
		}
	}
	for _, bad := range []string{"damaged", "set aside", "does not parse"} {
		if l := logs.find(bad); l != "" {
			t.Fatalf("restart after a crash before the partition.metadata writer: %s", l)
		}
	}
}

// TestPartitionMetadataDeferredDeleted: a replica deleted (its topic deleted, then created
// again) before the writer ran gets no file from it: the writer never writes into a
// directory that is not the replica's it was deferred for.
func TestPartitionMetadataDeferredDeleted(t *testing.T) {
	mem := vfs.NewStrictMemFS(nil)
	ctrl := controller.New(controller.Config{})
	t.Cleanup(ctrl.Close)
	b := startCreateBrokerWith(t, ctrl, mem, nil, func(b *Broker) { b.cfg.PartitionMetadataAsync = true })
	syncCtrl(t, ctrl)
	if _, err := ctrl.CreateTopic("t", 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	old, _ := ctrl.TopicID("t")
	if err := ctrl.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	if _, err := ctrl.CreateTopic("t", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	syncCtrl(t, ctrl)
	id, _ := ctrl.TopicID("t")
	if id == old {
		t.Fatal("the topic created again has its old id")
	}
	if n := b.WritePendingPartitionMetadata(); n != 2 {
		t.Fatalf("the writer wrote %d partition.metadata files, want 2 (the new incarnation's)", n)
	}
	for p := 0; p < 3; p++ {
		path := fmt.Sprintf("/data/t-%d/%s", p, PartitionMetadataFile)
		got, err := readTopicID(t, mem, path)
		if p == 2 {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s of the deleted incarnation's replica: %v, %v; want none", path, got, err)
			}
			continue
		}
		if err != nil || got != id {
			t.Fatalf("%s holds %v (%v), want the new incarnation's %v", path, got, err, id)
		}
	}
}
