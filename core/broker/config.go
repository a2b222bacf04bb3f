package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/vfs"
)

// Config configures one broker's replica manager. Field comments give the
// Kafka config name, unit and default. A Config is a value: the broker copies
// it in New and never mutates the caller's copy.
type Config struct {
	// ID is broker.id (node.id). Must be >= 0.
	ID int32
	// DataDir is log.dirs (a single directory). Replica directories are
	// <DataDir>/<topic>-<partition>/; the HW checkpoint is
	// <DataDir>/replication-offset-checkpoint.
	DataDir string
	// Addr is this broker's advertised listener "host:port", registered with the
	// controller by Start ("" registers no address: in-process transports).
	Addr string
	// FS is the file system of DataDir (logs, checkpoints); nil = vfs.OS. The embedded
	// cluster gives each broker a vfs.PowerLossFS (for the crash fault), the simulator a
	// vfs.MemFS.
	FS vfs.FS
	// Settings are the broker settings by their registry names (core/config): those given,
	// else the registry's (Kafka's) defaults. A setting without a typed field below is read
	// from here by the code that uses it.
	Settings config.Settings
	// Counters are the cost counters this broker adds to (its log writers' system calls, the
	// time its fetchers spend applying responses); several brokers (a cluster's) may share
	// them. nil = the broker's own.
	Counters *Counters
	// Manual starts no goroutine: no replica fetchers, ISR expiration, heartbeats,
	// checkpoints or retention run by themselves. The caller drives them (Fetchers and
	// their rounds, MaybeShrinkISRs, ApplyExpansions, Heartbeat, WriteHWCheckpoint,
	// ApplyRetention): the deterministic simulator does.
	Manual bool

	// NumReplicaFetchers is num.replica.fetchers, default 1: fetcher
	// goroutines (each with one connection) per source broker.
	NumReplicaFetchers int
	// ReplicaFetchWaitMaxMs is replica.fetch.wait.max.ms, default 500.
	ReplicaFetchWaitMaxMs int32
	// ReplicaFetchMinBytes is replica.fetch.min.bytes, default 1.
	ReplicaFetchMinBytes int32
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes (per partition),
	// default 1048576.
	ReplicaFetchMaxBytes int32
	// ReplicaFetchResponseMaxBytes is replica.fetch.response.max.bytes,
	// default 10485760.
	ReplicaFetchResponseMaxBytes int32
	// ReplicaFetchBackoffMs is replica.fetch.backoff.ms, default 1000.
	ReplicaFetchBackoffMs int32
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms, default 30000. ISR
	// expiration runs every ReplicaLagTimeMaxMs/2.
	ReplicaLagTimeMaxMs int64
	// MinInsyncReplicas is min.insync.replicas, default 1; the topic config
	// "min.insync.replicas" (controller.TopicConfig) overrides it.
	MinInsyncReplicas int
	// ReplicaHighWatermarkCheckpointIntervalMs is
	// replica.high.watermark.checkpoint.interval.ms, default 5000.
	ReplicaHighWatermarkCheckpointIntervalMs int64
	// LogRetentionCheckIntervalMs is log.retention.check.interval.ms,
	// default 300000: how often every replica's log applies retention.bytes
	// / retention.ms (never deleting past its HW nor the active segment).
	LogRetentionCheckIntervalMs int64
	// LeaderReplicationThrottledRate is leader.replication.throttled.rate and
	// FollowerReplicationThrottledRate follower.replication.throttled.rate, in bytes/s:
	// the bounds of the replication traffic of the throttled replicas (the topic configs
	// leader/follower.replication.throttled.replicas) this broker serves as a leader and
	// fetches as a follower (quota.go). 0 = Kafka's default, unlimited; the dynamic
	// broker configs of the same names override them at run time.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64
	// HeartbeatIntervalMs is how often the broker heartbeats the controller;
	// 0 = broker.session.timeout.ms/3 as configured on the controller
	// (default 9000/3 = 3000; Kafka's broker.heartbeat.interval.ms is 2000).
	HeartbeatIntervalMs int64

	// ScrubEnable is isrbench.log.scrub.enable (default true): a background scrub
	// CRC-checks every replica's segments after the start and every ScrubIntervalMs (isrbench.log.scrub.interval.ms,
	// default 3600000) at up to ScrubBytesPerSecond (isrbench.log.scrub.bytes.per.second,
	// default 10485760) and heals the damaged replicas it finds (damage.go).
	ScrubEnable         bool
	ScrubBytesPerSecond int64
	ScrubIntervalMs     int64
	// CloseSyncFS is isrbench.close.syncfs (default true): Close holds back the fsyncs of
	// the HW checkpoint and of every replica's close (segments, indexes, recovery points,
	// producer snapshots) and makes them durable with one syncfs, the checkpoints' renames,
	// and a second syncfs (vfs.HoldFS); false fsyncs each file and directory as it goes.
	CloseSyncFS bool
	// PartitionMetadataAsync is isrbench.partition.metadata.async (default false): a new
	// replica is created and hosted without its partition.metadata, which is written after
	// the batch of changes that created it, with one syncfs per createChunk replicas
	// (metadatawriter.go), as Kafka's UnifiedLog schedules its "flush-metadata-file" task;
	// false writes it with the replica's directory, before the replica is hosted.
	PartitionMetadataAsync bool
	// EpochCheckpointAsync is isrbench.leader.epoch.checkpoint.async (default false): the
	// leader-epoch-checkpoint writes of new epochs are queued to one goroutine of the process
	// (epochcheckpoint.go, partition.Config.EpochCheckpointLater); false writes them where
	// the epoch is assigned (the election, the fetcher's append).
	EpochCheckpointAsync bool
	// OnDamage, if set, is called with every damaged batch found in a replica (the
	// harness's findings), from the goroutine that found it (a fetch handler, the scrub):
	// it must not block. nil = only logged and counted (DamageStats).
	OnDamage func(DamageReport)

	// HousekeepingChangedOnly is isrbench.housekeeping.changed.only (default true): the HW
	// checkpoint and the ISR expiry visit only the replicas that changed since their previous
	// pass (changes.go); false visits every hosted replica at every pass (the ablation).
	HousekeepingChangedOnly bool
	// HousekeepingStagger is isrbench.housekeeping.stagger (default false): each broker's
	// periodic HW checkpoint and retention passes run at a phase of their interval set by
	// its ID (housekeepingPhase), not in step with the other brokers of the process.
	HousekeepingStagger bool

	// Log is the log configuration of every replica (log.segment.bytes, ...).
	Log log.Config
	// HWUpdate is isrbench.hw.update: "atomic" (default) | "mutex".
	HWUpdate string
	// TruncateMode is "epoch" (default, KIP-101/279) | "hw" (ablation:
	// truncate to the local HW on becoming a follower).
	TruncateMode string
	// ProduceDelay is isrbench.produce.delay: an artificial delay before
	// every Produce appends (for the regression-gate test). Default 0 (off).
	ProduceDelay time.Duration
	// ProduceSpin is isrbench.produce.spin: CPU work (a calibrated computation this long)
	// per record of every Produce, before it appends (the regression gate's CPU test). Default 0 (off).
	ProduceSpin time.Duration
	// Now is the nanosecond clock used for ISR decisions; nil = time.Now.
	Now func() int64
	// QuotaNow is the nanosecond clock of the replication quotas' rate windows (quota.go);
	// nil = Now. Tests step it a window at a time to count the bytes each window lets
	// through.
	QuotaNow func() int64
	// OnHWLag, if set, is called per leader batch with the time from its
	// append until the HW passed it and its record count.
	OnHWLag func(lagNs, records int64)
	// OnRecovery, if set, is called after each replica log is opened with
	// the recovery report of log.Open. nil = logged with the standard log.
	OnRecovery func(topic string, partition int32, r log.Recovery)
	// Logf receives the broker's log lines (recovery, fetcher errors, ISR
	// change failures); nil = the standard library logger.
	Logf func(format string, args ...any)
	// AlterPartition, if set, carries the leader's AlterPartition requests (ISR changes) to
	// the controller and their answers back: it must call answer exactly once, from any
	// goroutine and with no broker lock held, with the controller's answer, or with an error
	// wrapping kerr.RequestTimedOut when the request or its answer was lost (the outcome is
	// unknown: the broker keeps the change pending and sends the same request again, as
	// Kafka's AlterPartitionManager retries). nil (the default): the broker calls the
	// controller's AlterPartition directly and the answer comes at once (the in-process
	// metadata plane). The deterministic simulator sets it to delay, reorder and lose
	// requests and answers, so that fetches, appends, shrinks and elections land while a
	// change is in flight.
	AlterPartition func(req controller.AlterPartitionRequest, answer func(controller.PartitionState, error))
}

// DefaultConfig returns Kafka's defaults, the registry's (core/config); ID 0 and DataDir
// empty: the caller must set both.
func DefaultConfig() Config {
	return Config{
		NumReplicaFetchers:                       int(config.DefaultOf("num.replica.fetchers")),
		ReplicaFetchWaitMaxMs:                    int32(config.DefaultOf("replica.fetch.wait.max.ms")),
		ReplicaFetchMinBytes:                     int32(config.DefaultOf("replica.fetch.min.bytes")),
		ReplicaFetchMaxBytes:                     int32(config.DefaultOf("replica.fetch.max.bytes")),
		ReplicaFetchResponseMaxBytes:             int32(config.DefaultOf("replica.fetch.response.max.bytes")),
		ReplicaFetchBackoffMs:                    int32(config.DefaultOf("replica.fetch.backoff.ms")),
		ReplicaLagTimeMaxMs:                      config.DefaultOf("replica.lag.time.max.ms"),
		MinInsyncReplicas:                        int(config.DefaultOf("min.insync.replicas")),
		ReplicaHighWatermarkCheckpointIntervalMs: config.DefaultOf("replica.high.watermark.checkpoint.interval.ms"),
		LogRetentionCheckIntervalMs:              config.DefaultOf("log.retention.check.interval.ms"),
		ScrubEnable:                              config.Get("isrbench.log.scrub.enable").Default == "true",
		CloseSyncFS:                              config.Get("isrbench.close.syncfs").Default == "true",
		PartitionMetadataAsync:                   config.Get("isrbench.partition.metadata.async").Default == "true",
		EpochCheckpointAsync:                     config.Get("isrbench.leader.epoch.checkpoint.async").Default == "true",
		HousekeepingChangedOnly:                  config.Get("isrbench.housekeeping.changed.only").Default == "true",
		HousekeepingStagger:                      config.Get("isrbench.housekeeping.stagger").Default == "true",
		ScrubBytesPerSecond:                      config.DefaultOf("isrbench.log.scrub.bytes.per.second"),
		ScrubIntervalMs:                          config.DefaultOf("isrbench.log.scrub.interval.ms"),
		Log:                                      log.DefaultConfig(),
		HWUpdate:                                 partition.HWUpdateAtomic,
		TruncateMode:                             partition.TruncateModeEpoch,
	}
}

// checkRange checks one numeric setting against the registry's range under its Kafka name.
func checkRange(id int32, name string, v int64) error {
	e := config.Get(name)
	switch {
	case v < e.Min:
		return fmt.Errorf("broker %d: %s must be >= %d, got %d", id, name, e.Min, v)
	case v > e.Max:
		return fmt.Errorf("broker %d: %s must be <= %d, got %d", id, name, e.Max, v)
	}
	return nil
}

// checkDuration checks a duration switch against the registry's range.
func checkDuration(id int32, name string, d time.Duration) error {
	e := config.Get(name)
	if int64(d) < e.Min || int64(d) > e.Max {
		return fmt.Errorf("broker %d: %s must be in %s, got %v", id, name, e.Range(), d)
	}
	return nil
}

// validateConfig checks cfg against the registry (core/config) and Kafka's rules between
// settings, and fills the defaults of the zero fields that have one.
func validateConfig(cfg *Config) error {
	if cfg.ID < 0 {
		return fmt.Errorf("broker: broker.id must be >= 0, got %d", cfg.ID)
	}
	if cfg.DataDir == "" {
		return errors.New("broker: log.dirs (Config.DataDir) must be set")
	}
	if err := cfg.Settings.Check(); err != nil {
		return fmt.Errorf("broker %d: %w", cfg.ID, err)
	}
	if cfg.ReplicaHighWatermarkCheckpointIntervalMs <= 0 {
		cfg.ReplicaHighWatermarkCheckpointIntervalMs = config.DefaultOf("replica.high.watermark.checkpoint.interval.ms")
	}
	if cfg.LogRetentionCheckIntervalMs <= 0 {
		cfg.LogRetentionCheckIntervalMs = config.DefaultOf("log.retention.check.interval.ms")
	}
	if cfg.ScrubIntervalMs <= 0 {
		cfg.ScrubIntervalMs = config.DefaultOf("isrbench.log.scrub.interval.ms")
	}
	if cfg.ScrubBytesPerSecond <= 0 {
		cfg.ScrubBytesPerSecond = config.DefaultOf("isrbench.log.scrub.bytes.per.second")
	}
	// Each numeric setting under its Kafka name.
	for _, c := range []struct {
		name string
		val  int64
	}{
		{"num.replica.fetchers", int64(cfg.NumReplicaFetchers)},
		{"replica.fetch.wait.max.ms", int64(cfg.ReplicaFetchWaitMaxMs)},
		{"replica.fetch.min.bytes", int64(cfg.ReplicaFetchMinBytes)},
		{"replica.fetch.max.bytes", int64(cfg.ReplicaFetchMaxBytes)},
		{"replica.fetch.response.max.bytes", int64(cfg.ReplicaFetchResponseMaxBytes)},
		{"replica.fetch.backoff.ms", int64(cfg.ReplicaFetchBackoffMs)},
		{"replica.lag.time.max.ms", cfg.ReplicaLagTimeMaxMs},
		{"min.insync.replicas", int64(cfg.MinInsyncReplicas)},
		{"replica.high.watermark.checkpoint.interval.ms", cfg.ReplicaHighWatermarkCheckpointIntervalMs},
		{"log.retention.check.interval.ms", cfg.LogRetentionCheckIntervalMs},
		{"leader.replication.throttled.rate", max(cfg.LeaderReplicationThrottledRate, 0)},
		{"follower.replication.throttled.rate", max(cfg.FollowerReplicationThrottledRate, 0)},
	} {
		if err := checkRange(cfg.ID, c.name, c.val); err != nil {
			return err
		}
	}
	// Kafka refuses to start with a fetch wait longer than the lag time: followers would
	// drop out of the ISR while their fetch is parked (KafkaConfig's requirement).
	if int64(cfg.ReplicaFetchWaitMaxMs) > cfg.ReplicaLagTimeMaxMs {
		return fmt.Errorf("broker %d: replica.fetch.wait.max.ms (%d) must be <= replica.lag.time.max.ms (%d): a parked follower fetch would fall out of the ISR",
			cfg.ID, cfg.ReplicaFetchWaitMaxMs, cfg.ReplicaLagTimeMaxMs)
	}
	// Nor with a replica request timeout shorter than the fetch wait: a parked fetch would be
	// taken for a dead leader (KafkaConfig's requirement).
	if timeout := cfg.Settings.Int("replica.socket.timeout.ms"); int64(cfg.ReplicaFetchWaitMaxMs) > timeout {
		return fmt.Errorf("broker %d: replica.socket.timeout.ms (%d) must be >= replica.fetch.wait.max.ms (%d): a parked follower fetch would time out",
			cfg.ID, timeout, cfg.ReplicaFetchWaitMaxMs)
	}
	if cfg.HeartbeatIntervalMs <= 0 {
		cfg.HeartbeatIntervalMs = config.DefaultOf("broker.session.timeout.ms") / 3
	}
	hw, err := config.ParseHWUpdate(cfg.HWUpdate)
	if err != nil {
		return fmt.Errorf("broker %d: isrbench.hw.update: %w", cfg.ID, err)
	}
	cfg.HWUpdate = hw.String()
	tm, err := config.ParseTruncateMode(cfg.TruncateMode)
	if err != nil {
		return fmt.Errorf("broker %d: truncate mode (isrbench.truncate.mode): %w", cfg.ID, err)
	}
	cfg.TruncateMode = tm.String()
	if err := checkDuration(cfg.ID, "isrbench.produce.delay", cfg.ProduceDelay); err != nil {
		return err
	}
	if err := checkDuration(cfg.ID, "isrbench.produce.spin", cfg.ProduceSpin); err != nil {
		return err
	}
	if buildSpin.err != nil {
		return fmt.Errorf("broker %d: this build's extra produce cost (-ldflags -X %s.buildSpinFlag=%q): %w", cfg.ID, buildSpinPkg, buildSpinFlag, buildSpin.err)
	}
	if cfg.ProduceSpin > 0 || buildSpin.d > 0 {
		spinRate() // calibrate before the first request
	}
	return nil
}
