package partition

import (
	"fmt"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/vfs"
)

// Config configures a Replica. Zero fields take the defaults noted.
type Config struct {
	// MinInsyncReplicas is min.insync.replicas, default 1 (0 means 1). The effective value
	// is min(MinInsyncReplicas, replication factor), as Kafka >= 3.7 (KAFKA-15583); it can
	// be changed at run time (SetMinInsyncReplicas).
	MinInsyncReplicas int
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms in milliseconds,
	// default 30000 (0 means the default).
	ReplicaLagTimeMaxMs int64
	// HWUpdate is isrbench.hw.update: "atomic" (default: CAS-to-max, no
	// mutex on the fetch -> HW -> ack path) or "mutex" (ablation: Kafka's
	// leaderIsrUpdateLock, a read/write lock: HW advances under the read lock,
	// ISR and role changes under the write lock).
	HWUpdate string
	// TruncateMode is "epoch" (default, KIP-101/KIP-279 truncation by
	// leader epoch) or "hw" (ablation: a follower truncates to its local HW
	// before fetching from a new leader, the pre-KIP-101 behaviour).
	TruncateMode string
	// Now is the clock in nanoseconds (any fixed origin); nil = wall clock.
	Now func() int64
	// BrokerEpoch returns the broker epoch of broker id's current registration if it is
	// alive and unfenced, else -1 (Kafka's metadata-cache check in isReplicaIsrEligible).
	// A follower joins the ISR, and holds the HW back while it catches up, only if the
	// broker epoch of its fetches is that one. nil: every broker is eligible. Called on the
	// HW path: it must not block.
	BrokerEpoch func(id int32) int64
	// OnHWLag, if set, is called once per leader append when the HW passes
	// its last offset, with the time since the append (ns) and its record
	// count. It is called from whatever goroutine advanced the HW, under a
	// small lock: it must be quick and must not call into the Replica.
	OnHWLag func(lagNs int64, records int64)
	// FS is the file system of the leader-epoch checkpoint; nil = vfs.OS.
	FS vfs.FS
	// New says the replica's directory was just created and its log is empty (a new
	// topic's or partition's replica): there is no leader-epoch checkpoint or producer
	// snapshot to read, so none is looked for (the epoch cache starts empty, written at
	// the first MakeLeader).
	New bool
	// EpochCheckpointLater, if set, queues the leader-epoch checkpoint writes of new epochs
	// (EpochCache.Assign) to another goroutine, which runs write and reports its error; it
	// must not run write before it returns, and returns false when it cannot take it (the
	// write is made at once). Truncations still write the file before they return. nil:
	// every change writes the file at once.
	EpochCheckpointLater func(write func() error) bool
}

// Defaults of Config, the registry's (core/config).
var (
	DefaultReplicaLagTimeMaxMs = config.DefaultOf("replica.lag.time.max.ms")
	DefaultMinInsyncReplicas   = int(config.DefaultOf("min.insync.replicas"))
)

// HWUpdate and TruncateMode values (config.HWUpdate and config.TruncateMode).
const (
	HWUpdateAtomic    = string(config.HWUpdateAtomic)
	HWUpdateMutex     = string(config.HWUpdateMutex)
	TruncateModeEpoch = string(config.TruncateEpoch)
	TruncateModeHW    = string(config.TruncateHW)
)

// fill sets the defaults of zero fields and checks the others against the registry.
func (c *Config) fill() error {
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if err := config.Get("min.insync.replicas").CheckInt(int64(c.MinInsyncReplicas)); err != nil {
		return err
	}
	if c.ReplicaLagTimeMaxMs == 0 {
		c.ReplicaLagTimeMaxMs = DefaultReplicaLagTimeMaxMs
	}
	if err := config.Get("replica.lag.time.max.ms").CheckInt(c.ReplicaLagTimeMaxMs); err != nil {
		return err
	}
	hw, err := config.ParseHWUpdate(c.HWUpdate)
	if err != nil {
		return fmt.Errorf("isrbench.hw.update: %w", err)
	}
	c.HWUpdate = hw.String()
	tm, err := config.ParseTruncateMode(c.TruncateMode)
	if err != nil {
		return fmt.Errorf("truncate mode (isrbench.truncate.mode): %w", err)
	}
	c.TruncateMode = tm.String()
	if c.Now == nil {
		c.Now = func() int64 { return time.Now().UnixNano() }
	}
	c.FS = vfs.Or(c.FS)
	return nil
}
