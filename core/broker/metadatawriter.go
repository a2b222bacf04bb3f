package broker

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// The metadata writer (Config.PartitionMetadataAsync, isrbench.partition.metadata.async):
// the partition.metadata files of new replicas are written after the batch of changes that
// created them, not with their directories. Kafka does the same: UnifiedLog records the
// topic id when it creates a log and its scheduler writes the file soon after
// ("flush-metadata-file"). A creation thus makes one directory and one segment file per
// replica before it is hosted instead of also a third file, and the files it left out are
// written once the whole batch is applied, through a vfs.DeferFS, createChunk at a time,
// each run made durable by one syncfs, from a thread at the lowest priority (nice 19), so
// that they do not slow creations still under way (other brokers', the next topic's).
//
// Crash safety. The replica's directory and empty segment are durable before it is hosted
// (createReplicasLocked); its partition.metadata may not be until the writer's syncfs. A
// replica opened with no partition.metadata (a restart after a crash in that window) has it
// written then (checkTopicIDLocked), with the topic id the controller's durable metadata
// holds, so the topic and its replicas survive either way. A file cut short by a crash
// during the write does not parse and is rewritten the same way. The writer writes a file
// only for the replica it was deferred for, still hosted (under b.apply): never into the
// directory of a replica that was deleted, or replaced by a new incarnation of its topic.

// metadataWriter holds the replicas whose partition.metadata is still to be written.
type metadataWriter struct {
	mu      sync.Mutex
	pending []*hosted
	running bool // a writer goroutine runs and will take what is pending
}

// deferPartitionMetadata queues the partition.metadata of new replicas (b.apply held).
func (b *Broker) deferPartitionMetadata(hs []*hosted) {
	var add []*hosted
	for _, h := range hs {
		if h.topicID != (controller.TopicID{}) {
			add = append(add, h)
		}
	}
	if len(add) == 0 {
		return
	}
	b.pmeta.mu.Lock()
	b.pmeta.pending = append(b.pmeta.pending, add...)
	b.pmeta.mu.Unlock()
}

// startMetadataWriter starts the writer if files are pending and none runs (after a batch of
// controller changes; not with b.apply held). With Config.Manual it starts nothing: the
// caller writes them (WritePendingPartitionMetadata).
func (b *Broker) startMetadataWriter() {
	if b.cfg.Manual {
		return
	}
	b.pmeta.mu.Lock()
	start := len(b.pmeta.pending) > 0 && !b.pmeta.running
	b.pmeta.mu.Unlock()
	if !start {
		return
	}
	b.apply.Lock()
	defer b.apply.Unlock()
	if !b.running() {
		return // stop waits for b.apply: no goroutine is added after it
	}
	b.pmeta.mu.Lock()
	defer b.pmeta.mu.Unlock()
	if b.pmeta.running || len(b.pmeta.pending) == 0 {
		return
	}
	b.pmeta.running = true
	b.goLabeled("partition-metadata", b.writeMetadataLoop)
}

// WritePendingPartitionMetadata writes the partition.metadata files still pending, on the
// caller's goroutine, for a broker with Config.Manual (the metadata writer's work); it
// returns how many replicas it wrote them for. Not concurrently with itself.
func (b *Broker) WritePendingPartitionMetadata() int {
	b.pmeta.mu.Lock()
	list := b.pmeta.pending
	b.pmeta.pending = nil
	b.pmeta.mu.Unlock()
	n := 0
	for len(list) > 0 {
		k := min(len(list), createChunk)
		n += b.writeMetadataChunk(list[:k])
		list = list[k:]
	}
	return n
}

// writeMetadataLoop writes what is pending until nothing is, then exits.
func (b *Broker) writeMetadataLoop(ctx context.Context) {
	lowerThreadPriority() // the creations still under way go first
	for {
		b.pmeta.mu.Lock()
		list := b.pmeta.pending
		b.pmeta.pending = nil
		if len(list) == 0 || ctx.Err() != nil {
			b.pmeta.running = false
			b.pmeta.mu.Unlock()
			return
		}
		b.pmeta.mu.Unlock()
		for len(list) > 0 && ctx.Err() == nil {
			n := min(len(list), createChunk)
			_ = b.writeMetadataChunk(list[:n])
			list = list[n:]
		}
	}
}

// writeMetadataChunk writes the partition.metadata of hs that are still hosted, without
// fsync, then makes them durable with one syncfs, and returns how many it wrote. A failed
// write or syncfs takes the log directory offline, as a failed creation does.
func (b *Broker) writeMetadataChunk(hs []*hosted) int {
	fsys := vfs.NewDeferFS(b.fs, b.cfg.DataDir)
	written := 0
	for _, h := range hs {
		// b.apply is held for one file at a time: this thread runs at the lowest priority,
		// and a controller batch waiting for b.apply must not wait for a whole chunk of it.
		b.apply.Lock()
		if !b.running() || b.LogDirOffline() != nil {
			b.apply.Unlock()
			return 0
		}
		if b.lookup(h.key.topic, h.key.partition) != h {
			b.apply.Unlock()
			continue // deleted or reopened meanwhile: its directory is not this replica's
		}
		path := filepath.Join(b.cfg.DataDir, h.key.String(), PartitionMetadataFile)
		if err := vfs.WriteFileAtomic(fsys, path, partitionMetadata(h.topicID)); err != nil {
			err = b.storageFailed(log.IOError("write "+path, err))
			b.logf("broker %d: %s: writing %s: %v", b.cfg.ID, h.key, path, err)
			b.apply.Unlock()
			return written
		}
		b.apply.Unlock()
		written++
	}
	if written == 0 {
		return 0
	}
	if err := fsys.Commit(); err != nil {
		err = b.storageFailed(log.IOError("partition.metadata syncfs", err))
		b.logf("broker %d: making %d partition.metadata files durable: %v", b.cfg.ID, written, err)
		return 0
	}
	return written
}
