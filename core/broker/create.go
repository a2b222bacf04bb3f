package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// createBatch is a run of new replicas created together (createReplicasLocked).
type createBatch struct {
	fs *vfs.DeferFS
}

// newReplicasAt returns how many changes at the head of us create a replica of this broker
// that it does not host (a new topic's or partition's, a reassignment's), or change one
// created by an earlier change of the run (a creation's first election) (b.apply held).
// Whether the replica's directory is new is found when it is made (createReplicasLocked),
// not looked up here.
func (b *Broker) newReplicasAt(us []controller.Update) int {
	seen := map[tp]bool{}
	n := 0
	for _, u := range us {
		st := u.Partition
		if st == nil || !containsID(st.Replicas, b.cfg.ID) {
			break
		}
		key := tp{st.Topic, st.Partition}
		if !seen[key] && b.lookup(key.topic, key.partition) != nil {
			break
		}
		seen[key] = true
		n++
	}
	return n
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// createReplicasLocked creates the new replicas of us (see newReplicasAt) with one fsync of
// the file system for all of them (syncfs, through a vfs.DeferFS) instead of six or seven
// each (Kafka's LogManager fsyncs each new log directory's parent; its partition.metadata,
// leader-epoch checkpoint and snapshot files are fsynced as they are written): every
// replica's directory, files and first leader epoch are written without fsync, then one
// syncfs makes them durable, and only then are the replicas hosted (produce and fetch see
// them, followers start fetching). A crash before that syncfs leaves replicas that hold no
// record and were never served: recovery opens them as new (an empty or missing file is
// rewritten, an epoch cache rebuilt from the empty log). A replica that fails is reported
// as a single change would be; a failed syncfs takes the log directory offline, as any
// failed fsync does, and hosts none of them (b.apply held).
func (b *Broker) createReplicasLocked(us []controller.Update) {
	batch := &createBatch{fs: vfs.NewDeferFS(b.fs, b.cfg.DataDir)}
	made := map[tp]*hosted{}
	var order, fresh []*hosted
	for _, u := range us {
		st := *u.Partition
		key := tp{st.Topic, st.Partition}
		h, ok := made[key]
		if !ok {
			var damage string
			var err error
			h, damage, err = b.openReplicaOn(key, batch.fs, false, true)
			if err == nil {
				fresh = append(fresh, h)
			}
			if errors.Is(err, errReplicaDirExists) {
				// Not new after all (a replica left by an earlier incarnation or a failed
				// open): opened and recovered as at Start, its files not deferred.
				h, damage, err = b.openReplicaOn(key, b.fs, false, false)
			}
			if err != nil {
				b.applyFailedLocked(key, err)
				b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, st.Topic, st.Partition, st, err)
				continue
			}
			if damage != "" {
				b.logf("broker %d: %s: replica opened after start is damaged: %s", b.cfg.ID, key, damage)
			}
			made[key] = h
			order = append(order, h)
		} else if h.applied.Topic != "" && !newer(st, h.applied) {
			continue
		}
		if err := b.applyStateLocked(st, h, batch); err != nil {
			b.applyFailedLocked(key, err)
			b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, st.Topic, st.Partition, st, err)
		}
	}
	if err := batch.fs.Commit(); err != nil {
		err = b.storageFailed(log.IOError("create replicas", err))
		b.logf("broker %d: creating %d replicas: %v", b.cfg.ID, len(order), err)
		for _, h := range order {
			_ = h.l.Close()
		}
		return
	}
	for _, h := range order {
		b.registerLocked(h)
	}
	if b.cfg.PartitionMetadataAsync {
		b.deferPartitionMetadata(fresh)
	}
	for _, h := range order {
		if st := h.applied; st.Topic != "" && st.Leader != b.cfg.ID && st.Leader != controller.NoLeader {
			b.truncateDamagedLocked(h) // as applyStateLocked does for a follower
			b.addToFetcher(h, st.Leader, st.LeaderEpoch)
		}
	}
	b.notifyChanged()
}

// errReplicaDirExists says that the directory of a replica taken for new already exists.
var errReplicaDirExists = errors.New("the replica directory exists")

// createReplicaDir creates the directory of a new replica (its parent, the log directory,
// exists: one mkdir) and, for a topic with an id when metadata is set, its
// partition.metadata, reading nothing (see openReplicaOn's fresh). Kafka's LogManager creates
// the directory when it creates a log and records the topic id, whose file its scheduler
// writes soon after ("flush-metadata-file"); with metadata false the metadata writer does
// (metadatawriter.go).
func (b *Broker) createReplicaDir(fsys vfs.FS, dir string, id controller.TopicID, metadata bool) error {
	if err := vfs.MkdirNew(fsys, dir, 0o755); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", dir, errReplicaDirExists)
	} else if err != nil {
		return log.IOError("replica dir "+dir, err)
	}
	if id == (controller.TopicID{}) || !metadata {
		return nil
	}
	path := filepath.Join(dir, PartitionMetadataFile)
	if err := vfs.WriteFileAtomic(fsys, path, partitionMetadata(id)); err != nil {
		return log.IOError("write "+path, err)
	}
	return nil
}
