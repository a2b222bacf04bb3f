package workloads

import (
	"errors"
	"io"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// Options configure one run (see Run).
type Options struct {
	// Target is "embedded" (default) or "kafka://host:port[,host:port]".
	Target string
	// OutDir is the parent of the run directory; default "results/runs".
	OutDir string
	// ID overrides the run id (default: UTC yyyymmdd-hhmmss-<name>-<config hash>).
	ID string
	// Profile lists pprof kinds (cpu, heap, allocs, mutex, block, goroutine) captured during
	// the measurement into <run dir>/profiles/.
	Profile []string
	// Quiet suppresses the summary table and progress line.
	Quiet bool
	// Stdout gets the summary table, Stderr the progress line and notes (nil = discard).
	Stdout, Stderr io.Writer
	// WaitMode, when set, is every producer's pacer wait, over the spec's producers.pacer.
	WaitMode load.WaitMode
	// TimelineInterval is the timeline's period; default 1s (for runs shorter than 10s 100ms,
	// or longer above 100 partitions: see sampleInterval).
	TimelineInterval time.Duration
	// Commit is recorded in env.commit (default: the binary's VCS revision).
	Commit string
	// Assume lists broker settings already in effect on a kafka:// target (ParseAssume):
	// the run neither changes them nor needs the brokers to report them.
	Assume map[string]string
	// Worker makes the run one worker of several (load.Worker); zero: the whole load.
	Worker load.Worker

	// session applies the spec's settings to a kafka:// target; Sweep sets one for all its
	// points, nil makes Run use its own (restored when it ends).
	session *target.ConfigSession

	// statFS replaces the disk guard's statfs (tests simulate a filling disk).
	statFS func(path string) (free, total uint64, err error)
	// fs is the embedded brokers' file system (tests fill it).
	fs vfs.FS
	// beforeClose, when set, is called with the target just before it is closed (tests read
	// the embedded cluster's whole-run cost counters).
	beforeClose func(target.Target)
}

// ErrDurability is wrapped by Run's error when acknowledged records were lost although only
// clean leader elections were allowed (the result is still returned and written).
var ErrDurability = errors.New("acknowledged records lost")
