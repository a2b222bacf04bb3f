package broker

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/vfs"
)

// openReplica opens (creating if needed) the replica directory, reports the log recovery,
// builds the partition.Replica with the topic's configs and restores its HW from the
// checkpoint (b.apply held, or Start before the subscription). damage says why the replica
// lost acknowledged data ("" if it did not, as far as recovery can tell): its log ends below
// the HW it checkpointed (a deleted segment or directory, unsynced bytes below the HW lost
// in a power loss), or the checkpoint that would tell is missing or unreadable.
func (b *Broker) openReplica(key tp) (h *hosted, damage string, err error) {
	return b.openReplicaOn(key, b.fs, true, false)
}

// openReplicaOn is openReplica through fsys (a vfs.DeferFS for the new replicas of a batch,
// see createReplicasLocked); unless register is set, the replica is not hosted yet (the
// caller registers it). fresh says the replica is taken for new: its directory is created
// with an empty log (and its partition.metadata, unless Config.PartitionMetadataAsync defers
// it to the metadata writer), and nothing is read (createReplicaDir); a
// directory already there fails with errReplicaDirExists, having changed nothing.
func (b *Broker) openReplicaOn(key tp, fsys vfs.FS, register, fresh bool) (h *hosted, damage string, err error) {
	if err := b.LogDirOffline(); err != nil {
		// Nothing is opened in an offline log directory: what a failed fsync left there (a
		// batch of new replicas whose syncfs failed) was never durable.
		return nil, "", fmt.Errorf("replica %s: the log directory is offline: %w", key, err)
	}
	dir := filepath.Join(b.cfg.DataDir, key.String())
	dirMissing := fresh
	if !fresh {
		_, statErr := fsys.Stat(dir)
		dirMissing = statErr != nil
	}
	topicID, ok := b.ctrl.TopicID(key.topic)
	switch {
	case fresh:
		if err := b.createReplicaDir(fsys, dir, topicID, !b.cfg.PartitionMetadataAsync); errors.Is(err, errReplicaDirExists) {
			return nil, "", err // nothing was made: the caller opens it as an existing one
		} else if err != nil {
			return nil, "", fmt.Errorf("replica %s: %w", key, b.storageFailed(err))
		}
	case ok:
		if err := b.checkTopicIDLocked(fsys, key, topicID); err != nil {
			return nil, "", fmt.Errorf("replica %s: %w", key, b.storageFailed(err))
		}
	}
	configs := b.ctrl.TopicConfig(key.topic)
	lcfg, err := topicLogConfig(b.apply.dyn.log, configs)
	if err != nil {
		b.logf("broker %d: %s: topic configs: %v (using the broker's)", b.cfg.ID, key, err)
		lcfg = b.apply.dyn.log
	}
	lcfg.FS = fsys
	var cell *hosted // the replica, once opened: its log reports damage to it
	lcfg.OnDamage = func(d log.DamageError) {
		if cell != nil {
			b.onDamage(cell, d)
		}
	}
	var l *log.Log
	var rec log.Recovery
	if fresh {
		l, err = log.Create(dir, lcfg)
		rec.Segments = 1
	} else {
		l, rec, err = log.Open(dir, lcfg)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open log %s: %w", dir, b.storageFailed(err))
	}
	if dirMissing {
		// The new replica directory's entry durable, or a crash loses the replica whole.
		if err := fsys.SyncDir(b.cfg.DataDir); err != nil {
			_ = l.Close()
			return nil, "", fmt.Errorf("replica %s: fsync %s: %w", key, b.cfg.DataDir, b.storageFailed(fmt.Errorf("%w: %w", err, kerr.KafkaStorageError)))
		}
	}
	if b.cfg.OnRecovery != nil {
		b.cfg.OnRecovery(key.topic, key.partition, rec)
	} else if rec.TruncatedBytes > 0 || rec.IndexesRebuilt > 0 {
		b.logf("broker %d: %s recovery: %s", b.cfg.ID, key, rec)
	}
	r, err := partition.NewReplica(key.topic, key.partition, b.cfg.ID, l, dir, partition.Config{
		MinInsyncReplicas:    topicMinISR(b.apply.dyn.minISR, configs),
		ReplicaLagTimeMaxMs:  b.cfg.ReplicaLagTimeMaxMs,
		HWUpdate:             b.cfg.HWUpdate,
		TruncateMode:         b.cfg.TruncateMode,
		Now:                  b.now,
		BrokerEpoch:          b.ctrl.BrokerEpoch,
		OnHWLag:              b.cfg.OnHWLag,
		FS:                   fsys,
		New:                  fresh,
		EpochCheckpointLater: b.epochCheckpointLater(),
	})
	if err != nil {
		_ = l.Close()
		return nil, "", fmt.Errorf("replica %s: %w", key, err)
	}
	if why := r.EpochCacheRebuilt(); why != "" {
		b.logf("broker %d: %s recovery: %s", b.cfg.ID, key, why)
	}
	b.ckpt.Lock()
	hw, ok := b.ckpt.hws[key]
	missing, ckErr := b.ckpt.missing, b.ckpt.err
	b.ckpt.Unlock()
	// A replica may have lost acknowledged data only if it held some: the HW checkpoint
	// says so, or (checkpoint unreadable or gone) it was assigned to an earlier incarnation
	// of this broker, at Start. A replica opened later (a new topic or partition, a
	// reassignment) or a broker's first start has nothing to lose: an empty new replica is
	// not damaged.
	atStart := b.epoch.Load() < 0
	_, registeredBefore := b.ctrl.Broker(b.cfg.ID)
	switch {
	case ok && hw > r.LEO():
		damage = fmt.Sprintf("its log ends at offset %d, below the checkpointed HW %d", r.LEO(), hw)
		if dirMissing {
			damage = fmt.Sprintf("its directory %s was missing (checkpointed HW %d)", dir, hw)
		}
	case !atStart || !registeredBefore:
	case ckErr != nil:
		damage = "the HW checkpoint is unreadable, so lost acknowledged data cannot be ruled out"
	case missing && r.LEO() == 0 && dirMissing:
		damage = fmt.Sprintf("the log directory has no %s and the replica has no directory: a new or wiped disk", HWCheckpointFile)
	}
	if ok {
		if err := r.RestoreHW(min(hw, r.LEO())); err != nil {
			b.logf("broker %d: %s: restore HW %d: %v", b.cfg.ID, key, hw, err)
		}
	}
	h = &hosted{key: key, r: r, l: l, topicID: topicID, topicConfigs: configs}
	h.maxMessage.Store(topicMaxMessage(b.apply.dyn.maxMessage, configs))
	if ok && hw > r.LEO() {
		h.lostHW = hw
	}
	cell = h
	if register {
		b.registerLocked(h)
	}
	return h, damage, nil
}

// registerLocked makes h a hosted replica: produce, fetch and the checkpoints see it from
// now on (b.apply held).
func (b *Broker) registerLocked(h *hosted) {
	b.applyThrottledLocked(h)
	b.mu.Lock()
	b.mu.replicas[h.key] = h
	b.mu.Unlock()
	b.registerChanges(h)
}

// topicMinISR is the topic's min.insync.replicas override, else the broker's.
func topicMinISR(broker int, configs map[string]string) int {
	if v, ok := configs[controller.ConfigMinInsyncReplicas]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			return n
		}
	}
	return broker
}

// topicMaxMessage is the topic's max.message.bytes override (validated by the controller),
// else the broker's message.max.bytes.
func topicMaxMessage(broker int64, configs map[string]string) int64 {
	if v, ok := configs[controller.ConfigMaxMessageBytes]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return broker
}

// topicLogConfig is the broker's log config with the topic's overrides (validated by the
// controller) applied.
func topicLogConfig(base log.Config, configs map[string]string) (log.Config, error) {
	c := base
	for k, v := range configs {
		var dst *int64
		switch k {
		case controller.ConfigRetentionMs:
			dst = &c.RetentionMs
		case controller.ConfigRetentionBytes:
			dst = &c.RetentionBytes
		case controller.ConfigSegmentBytes:
			dst = &c.SegmentBytes
		case controller.ConfigFlushMessages:
			dst = &c.FlushMessages
		case controller.ConfigFlushMs:
			dst = &c.FlushMs
		case controller.ConfigIndexIntervalBytes:
			n, err := strconv.Atoi(v)
			if err != nil {
				return base, fmt.Errorf("%s=%q: %w", k, v, err)
			}
			c.IndexIntervalBytes = n
			continue
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return base, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		*dst = n
	}
	return c, nil
}

// applyTopicConfigsLocked applies a topic config change to a hosted replica: its log
// (retention, segment size, index interval, flush policy), min.insync.replicas and
// max.message.bytes
// (b.apply held).
func (b *Broker) applyTopicConfigsLocked(h *hosted, configs map[string]string) {
	if maps.Equal(configs, h.topicConfigs) {
		return
	}
	h.topicConfigs = configs
	b.applyThrottledLocked(h)
	b.reconfigureReplicaLocked(h)
	b.notifyChanged()
}

// reconfigureReplicaLocked applies the broker's current log defaults and
// min.insync.replicas (dyn) with the replica's topic overrides to it (b.apply held).
func (b *Broker) reconfigureReplicaLocked(h *hosted) {
	lcfg, err := topicLogConfig(b.apply.dyn.log, h.topicConfigs)
	if err == nil {
		err = h.l.Reconfigure(lcfg)
	}
	if err != nil {
		b.logf("broker %d: %s: applying topic configs %v: %v", b.cfg.ID, h.key, h.topicConfigs, err)
	}
	h.r.SetMinInsyncReplicas(topicMinISR(b.apply.dyn.minISR, h.topicConfigs))
	h.maxMessage.Store(topicMaxMessage(b.apply.dyn.maxMessage, h.topicConfigs))
}
