package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// PartitionMetadataFile is the file in a replica directory naming the topic incarnation the
// replica belongs to (Kafka's partition.metadata, KIP-516):
//
//	version: 0
//	topic_id: <TopicID, URL-safe base64>
//
// A directory whose file names another incarnation (the topic was deleted and created
// again while this broker was down) is stray: its data belongs to the old topic.
const PartitionMetadataFile = "partition.metadata"

// StraySuffix ends the name a stray replica directory is renamed to (Kafka renames stray
// logs to <topic>-<partition>.<uuid>-stray and leaves them to the operator).
const StraySuffix = "-stray"

// deleteTopicLocked removes every replica of a deleted topic (a TopicUpdate with Deleted):
// each leaves its fetcher (no answer is applied to it afterwards), is closed (pending
// acks=all produces end with NOT_LEADER_OR_FOLLOWER; later requests find no replica:
// UNKNOWN_TOPIC_OR_PARTITION), its directory is removed and its HW checkpoint entry dropped
// (the checkpoint is rewritten at once, so a topic created again under the name does not
// inherit it). b.apply held.
func (b *Broker) deleteTopicLocked(topic string) {
	var gone []*hosted
	for _, h := range b.allReplicas() {
		if h.key.topic == topic {
			gone = append(gone, h)
		}
	}
	for _, h := range gone {
		b.removeFromFetchers(h.key)
		b.unregisterLocked(h)
		b.exp.Lock()
		delete(b.exp.pending, h.key)
		b.exp.Unlock()
		if err := h.r.Close(); err != nil {
			b.logf("broker %d: %s: closing the replica of a deleted topic: %v", b.cfg.ID, h.key, err)
		}
		dir := filepath.Join(b.cfg.DataDir, h.key.String())
		if err := b.fs.RemoveAll(dir); err != nil {
			b.logf("broker %d: %s: %v", b.cfg.ID, h.key, b.storageFailed(log.IOError("deleting "+dir, err)))
		}
		b.ckpt.Lock()
		delete(b.ckpt.hws, h.key)
		b.ckpt.Unlock()
	}
	if len(gone) == 0 {
		return
	}
	if err := b.fs.SyncDir(b.cfg.DataDir); err != nil {
		b.logf("broker %d: deleting topic %s: %v", b.cfg.ID, topic, b.storageFailed(log.IOError("fsync "+b.cfg.DataDir, err)))
	}
	if err := b.WriteHWCheckpoint(); err != nil {
		b.logf("broker %d: %v", b.cfg.ID, err)
	}
	b.logf("broker %d: topic %s deleted: %d replica(s) removed", b.cfg.ID, topic, len(gone))
	b.notifyChanged()
}

// parseReplicaDir parses a replica directory name "<topic>-<partition>".
func parseReplicaDir(name string) (tp, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return tp{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.Itoa(int(p)) != name[i+1:] {
		return tp{}, false
	}
	if controller.ValidateTopicName(name[:i]) != nil {
		return tp{}, false
	}
	return tp{name[:i], int32(p)}, true
}

// setAsideStrayLocked renames the replica directories in DataDir that the controller does
// not assign to this broker (assigned), as Kafka does with stray logs: they belong to
// topics deleted while this broker was down. Their HW checkpoint entries are dropped. The
// data is left to the operator (<dir>.<n>-stray). Called by Start with b.apply held.
func (b *Broker) setAsideStrayLocked(assigned map[tp]bool) {
	ents, err := b.fs.ReadDir(b.cfg.DataDir)
	if err != nil {
		b.logf("broker %d: listing %s for stray replicas: %v", b.cfg.ID, b.cfg.DataDir, err)
		return
	}
	for _, e := range ents {
		key, ok := parseReplicaDir(e.Name())
		if !ok || !e.IsDir() || assigned[key] {
			continue
		}
		b.setAside(key, "its partition is not assigned to this broker (its topic was deleted, or it was reassigned away while this broker was down)")
	}
	b.ckpt.Lock()
	for key := range b.ckpt.hws {
		if !assigned[key] {
			delete(b.ckpt.hws, key)
		}
	}
	b.ckpt.Unlock()
}

// setAside renames the directory of key to <dir>.<n>-stray (n: the broker's clock in ns).
func (b *Broker) setAside(key tp, why string) {
	dir := filepath.Join(b.cfg.DataDir, key.String())
	to := dir + "." + strconv.FormatInt(b.now(), 10) + StraySuffix
	if err := b.fs.Rename(dir, to); err != nil {
		b.logf("broker %d: %s: stray replica directory (%s) not renamed: %v", b.cfg.ID, key, why, err)
		return
	}
	if err := b.fs.SyncDir(b.cfg.DataDir); err != nil {
		b.logf("broker %d: fsync %s: %v", b.cfg.ID, b.cfg.DataDir, err)
	}
	b.ckpt.Lock()
	delete(b.ckpt.hws, key)
	b.ckpt.Unlock()
	b.logf("broker %d: %s: stray replica directory set aside as %s: %s", b.cfg.ID, key, filepath.Base(to), why)
}

// checkTopicIDLocked makes sure the replica directory of key belongs to the topic's current
// incarnation id before it is opened: a directory whose partition.metadata names another id
// is set aside (stray) so the replica starts empty; a directory without the file (new, or
// written before topic ids) gets it, and so does one holding the topic's legacy id (its
// creation number, written before ids were random: controller.LegacyTopicID). Zero ids are
// not checked.
func (b *Broker) checkTopicIDLocked(fsys vfs.FS, key tp, id controller.TopicID) error {
	if id == (controller.TopicID{}) {
		return nil
	}
	dir := filepath.Join(b.cfg.DataDir, key.String())
	path := filepath.Join(dir, PartitionMetadataFile)
	data, err := vfs.ReadFile(fsys, path)
	switch {
	case err == nil:
		got, ok := parsePartitionMetadata(data)
		legacy, _ := b.ctrl.LegacyTopicID(key.topic)
		switch {
		case ok && got == id:
			return nil
		case ok && got == legacy && legacy != (controller.TopicID{}):
			b.logf("broker %d: %s: %s holds the topic's legacy id %v: rewritten with its id %v", b.cfg.ID, key, path, got, id)
		case ok:
			b.setAside(key, fmt.Sprintf("it holds topic id %v, the topic is now %v (deleted and created again)", got, id))
		default:
			b.logf("broker %d: %s: %s does not parse (%q): rewritten", b.cfg.ID, key, path, data)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return log.IOError("read "+path, err)
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return log.IOError("replica dir "+dir, err)
	}
	if err := vfs.WriteFileAtomic(fsys, path, partitionMetadata(id)); err != nil {
		return log.IOError("write "+path, err)
	}
	return nil
}

// partitionMetadata is the contents of the partition.metadata file of topic id's replicas.
func partitionMetadata(id controller.TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String() + "\n")
}

func parsePartitionMetadata(data []byte) (controller.TopicID, bool) {
	var version, id string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "topic_id":
			id = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return controller.TopicID{}, false
	}
	return controller.ParseTopicID(id)
}

// applyBrokerConfigsLocked applies the broker's dynamic configs (controller
// BrokerConfigUpdate; a key absent takes the static Config): num.replica.fetchers resizes the
// fetcher pools; min.insync.replicas, message.max.bytes and the log.* defaults reconfigure
// every replica without a topic override. Other keys (unclean.leader.election.enable,
// the ones that accept only Kafka's default) are applied elsewhere or change nothing here.
// b.apply held.
func (b *Broker) applyBrokerConfigsLocked(configs map[string]string) {
	if maps.Equal(configs, b.apply.dyn.configs) {
		return
	}
	b.apply.dyn.configs = maps.Clone(configs)
	b.applyThrottleRatesLocked(configs)
	num := func(key string, def int64) int64 {
		v, ok := configs[key]
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.logf("broker %d: dynamic broker config %s=%q is not an integer (kept %d)", b.cfg.ID, key, v, def)
			return def
		}
		return n
	}
	lc := b.cfg.Log
	lc.SegmentBytes = num("log.segment.bytes", lc.SegmentBytes)
	lc.IndexIntervalBytes = int(num("log.index.interval.bytes", int64(lc.IndexIntervalBytes)))
	lc.RetentionBytes = num("log.retention.bytes", lc.RetentionBytes)
	lc.RetentionMs = num("log.retention.ms", lc.RetentionMs)
	lc.FlushMessages = num("log.flush.interval.messages", lc.FlushMessages)
	lc.FlushMs = num("log.flush.interval.ms", lc.FlushMs)
	minISR := int(num("min.insync.replicas", int64(b.cfg.MinInsyncReplicas)))
	maxMessage := num("message.max.bytes", b.cfg.Settings.Int("message.max.bytes"))
	if !sameLogDefaults(lc, b.apply.dyn.log) || minISR != b.apply.dyn.minISR || maxMessage != b.apply.dyn.maxMessage {
		b.apply.dyn.log, b.apply.dyn.minISR, b.apply.dyn.maxMessage = lc, minISR, maxMessage
		for _, h := range b.allReplicas() {
			b.reconfigureReplicaLocked(h)
		}
	}
	n := int(num("num.replica.fetchers", int64(b.cfg.NumReplicaFetchers)))
	if n >= 1 {
		b.resizeFetchersLocked(n)
	}
	b.notifyChanged()
}

// assignedKeys returns the keys of the partition states.
func assignedKeys(sts []controller.PartitionState) map[tp]bool {
	out := make(map[tp]bool, len(sts))
	for _, st := range sts {
		out[tp{st.Topic, st.Partition}] = true
	}
	return out
}

// sameLogDefaults compares the log settings dynamic broker configs change.
func sameLogDefaults(a, b log.Config) bool {
	return a.SegmentBytes == b.SegmentBytes && a.IndexIntervalBytes == b.IndexIntervalBytes &&
		a.RetentionBytes == b.RetentionBytes && a.RetentionMs == b.RetentionMs &&
		a.FlushMessages == b.FlushMessages && a.FlushMs == b.FlushMs
}
