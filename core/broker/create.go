package broker

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// createBatch is a run of new replicas created together (createReplicasLocked).
type createBatch struct {
	fs    *vfs.DeferFS
	fetch []*hosted // followers to add to their fetchers once the batch is durable
}

// newReplicasAt returns how many changes at the head of us each create a replica of this
// broker that it neither hosts nor has a directory for (a new topic's or partition's, a
// reassignment's), for different partitions (b.apply held).
func (b *Broker) newReplicasAt(us []controller.Update) int {
	seen := map[tp]bool{}
	n := 0
	for _, u := range us {
		st := u.Partition
		if st == nil || !containsID(st.Replicas, b.cfg.ID) {
			break
		}
		key := tp{st.Topic, st.Partition}
		if seen[key] || b.lookup(key.topic, key.partition) != nil {
			break
		}
		if _, err := b.fs.Stat(filepath.Join(b.cfg.DataDir, key.String())); !errors.Is(err, fs.ErrNotExist) {
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
	type made struct {
		h  *hosted
		st controller.PartitionState
	}
	var ok []made
	for _, u := range us {
		st := *u.Partition
		key := tp{st.Topic, st.Partition}
		h, damage, err := b.openReplicaOn(key, batch.fs, false)
		if err == nil {
			if damage != "" {
				b.logf("broker %d: %s: replica opened after start is damaged: %s", b.cfg.ID, key, damage)
			}
			err = b.applyStateLocked(st, h, batch)
		}
		if err != nil {
			b.applyFailedLocked(key, err)
			b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, st.Topic, st.Partition, st, err)
			if h == nil {
				continue
			}
		}
		ok = append(ok, made{h, st})
	}
	if err := batch.fs.Commit(); err != nil {
		err = b.storageFailed(log.IOError("create replicas", err))
		b.logf("broker %d: creating %d replicas: %v", b.cfg.ID, len(ok), err)
		for _, m := range ok {
			_ = m.h.l.Close()
		}
		return
	}
	for _, m := range ok {
		b.registerLocked(m.h)
	}
	for _, h := range batch.fetch {
		b.addToFetcher(h, h.applied.Leader, h.applied.LeaderEpoch)
	}
	b.notifyChanged()
}
