package config

import (
	"fmt"
	"strings"
)

// HWUpdate is isrbench.hw.update: how a leader advances its high watermark. The mode types
// are plain values (the lists HWUpdates, TruncateModes and IOs are never changed): safe for
// concurrent use.
type HWUpdate string

// The isrbench.hw.update modes.
const (
	// HWUpdateAtomic (default): compare-and-swap to the maximum, no mutex on the
	// fetch -> HW -> ack path.
	HWUpdateAtomic HWUpdate = "atomic"
	// HWUpdateMutex (ablation): Kafka's leaderIsrUpdateLock, a read/write lock: HW advances
	// under the read lock, ISR and role changes under the write lock.
	HWUpdateMutex HWUpdate = "mutex"
)

// HWUpdates lists the isrbench.hw.update modes, the default first.
var HWUpdates = []HWUpdate{HWUpdateAtomic, HWUpdateMutex}

func (m HWUpdate) String() string { return string(m) }

// ParseHWUpdate parses an isrbench.hw.update value; "" is the default.
func ParseHWUpdate(v string) (HWUpdate, error) { return parseMode(v, HWUpdates) }

// TruncateMode is isrbench.truncate.mode: how a follower truncates its log when it follows a
// new leader.
type TruncateMode string

// The isrbench.truncate.mode modes.
const (
	// TruncateEpoch (default): by leader epoch (KIP-101, KIP-279).
	TruncateEpoch TruncateMode = "epoch"
	// TruncateHW (ablation, can lose data): to the local HW before fetching from a new
	// leader, the pre-KIP-101 behaviour.
	TruncateHW TruncateMode = "hw"
)

// TruncateModes lists the isrbench.truncate.mode modes, the default first.
var TruncateModes = []TruncateMode{TruncateEpoch, TruncateHW}

func (m TruncateMode) String() string { return string(m) }

// ParseTruncateMode parses an isrbench.truncate.mode value; "" is the default.
func ParseTruncateMode(v string) (TruncateMode, error) { return parseMode(v, TruncateModes) }

// IO is isrbench.io: the log's write path.
type IO string

// The isrbench.io modes.
const (
	IOPwritev IO = "pwritev" // default: one pwritev per batch of appends
	IOUring   IO = "uring"   // io_uring (falls back to pwritev where the kernel refuses it)
	IOWrite   IO = "write"   // one write per append
)

// IOs lists the isrbench.io modes, the default first.
var IOs = []IO{IOPwritev, IOUring, IOWrite}

func (m IO) String() string { return string(m) }

// ParseIO parses an isrbench.io value; "" is the default.
func ParseIO(v string) (IO, error) { return parseMode(v, IOs) }

// modeNames returns the names of modes, in order.
func modeNames[M ~string](modes []M) []string {
	out := make([]string, len(modes))
	for i, m := range modes {
		out[i] = string(m)
	}
	return out
}

// parseMode returns v as one of modes ("" = the first, the default); the error names the
// allowed values.
func parseMode[M ~string](v string, modes []M) (M, error) {
	if v == "" {
		return modes[0], nil
	}
	for _, m := range modes {
		if string(m) == v {
			return m, nil
		}
	}
	return "", fmt.Errorf("%q is not one of %s", v, strings.Join(modeNames(modes), ", "))
}
