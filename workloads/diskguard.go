package workloads

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// LowDiskError ends a run whose data dir's filesystem fell below isrbench.min.free.disk.
type LowDiskError struct {
	Path  string // the guarded directory
	Free  int64  // bytes available to the process (statfs f_bavail)
	Floor int64  // the floor in bytes
	Spec  string // the floor as configured ("2GiB", "5%")
	// During is true when the load was running (it was stopped), false when the run was
	// refused before the load.
	During bool
}

func (e *LowDiskError) Error() string {
	what := "run not started"
	if e.During {
		what = "stopped producing and ended the run early"
	}
	return fmt.Sprintf("disk guard: free space on the filesystem of %s is %d bytes (%s), below isrbench.min.free.disk=%s (%d bytes): %s; data dir removed",
		e.Path, e.Free, humanBytes(e.Free), e.Spec, e.Floor, what)
}

// ErrLowDisk is matched (errors.Is) by every *LowDiskError.
var ErrLowDisk = errors.New("disk guard: free space below isrbench.min.free.disk")

func (e *LowDiskError) Is(target error) bool { return target == ErrLowDisk }

// StorageError ends a run in which a broker's log directory went offline: a write, fsync or
// truncation failed (a full disk with the guard off, an I/O error). The core answers
// KAFKA_STORAGE_ERROR for that broker's replicas from then on.
type StorageError struct {
	Broker int32
	Err    error
}

func (e *StorageError) Error() string {
	return fmt.Sprintf("broker %d: KAFKA_STORAGE_ERROR: its log directory went offline (%v); the run stopped producing and ended early", e.Broker, e.Err)
}

func (e *StorageError) Unwrap() error { return e.Err }

// watchStorage checks every interval until ctx ends; the first offline log directory calls
// stop with a *StorageError and ends the watch.
func watchStorage(ctx context.Context, t target.OfflineLogDirs, every time.Duration, stop func(error)) {
	poll.Every(ctx, every, func() bool {
		id, err, ok := t.OfflineLogDir()
		if ok {
			stop(&StorageError{Broker: id, Err: err})
		}
		return !ok
	})
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

// statFS returns the bytes available to an unprivileged process and the filesystem's size.
func statFS(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return st.Bavail * bs, st.Blocks * bs, nil
}

// diskGuard watches the filesystem of one directory. check is called from the guard's
// goroutine (and once synchronously before the load); peak and minFree are read after the
// goroutine stopped, or under mu.
type diskGuard struct {
	path  string
	floor spec.DiskFloor
	stat  func(path string) (free, total uint64, err error) // statFS; tests fake a filling disk
	now   func() time.Time                                  // time.Now; tests script the walk's cost
	// nextWalk is when check may walk path again (see walkCostShare); owned by the goroutine
	// that calls check.
	nextWalk time.Time

	mu       sync.Mutex
	peakSize int64 // largest apparent size of path seen (bytes of its regular files)
	minFree  int64 // least free bytes seen; -1 before the first check
}

func newDiskGuard(path string, floor spec.DiskFloor, stat func(string) (uint64, uint64, error)) *diskGuard {
	if stat == nil {
		stat = statFS
	}
	return &diskGuard{path: path, floor: floor, stat: stat, now: time.Now, minFree: -1}
}

// walkCostShare bounds what measuring the data dir costs the run: after a walk that took d,
// check walks again only walkCostShare*d later, so the walk keeps under 1/walkCostShare of one
// core. statfs, which the floor needs, stays on every check. The walk is O(files): at 1,000
// partitions RF 3 some 9,000 lstat calls, tens of milliseconds of CPU a second that the
// cluster under test would otherwise have (on a loaded 2-core host a fifth of the process's
// CPU). The peak is thus sampled less often on large data dirs; walk measures it once more
// after the load.
const walkCostShare = 50

// walk measures the directory's size now and folds it into the peak.
func (g *diskGuard) walk() {
	size := dirSize(g.path)
	g.mu.Lock()
	g.peakSize = max(g.peakSize, size)
	g.mu.Unlock()
}

// check measures the filesystem once, and the directory unless its last walk is too recent
// (walkCostShare); it returns a *LowDiskError when the free space is below the floor, or a
// statfs error.
func (g *diskGuard) check() error {
	free, total, err := g.stat(g.path)
	if err != nil {
		return err
	}
	if now := g.now(); !now.Before(g.nextWalk) {
		g.walk()
		g.nextWalk = now.Add(walkCostShare * g.now().Sub(now))
	}
	g.mu.Lock()
	if g.minFree < 0 || int64(free) < g.minFree {
		g.minFree = int64(free)
	}
	g.mu.Unlock()
	if g.floor.Off() {
		return nil
	}
	if floor := g.floor.Of(total); int64(free) < floor {
		return &LowDiskError{Path: g.path, Free: int64(free), Floor: floor, Spec: g.floor.String()}
	}
	return nil
}

// stats returns the peak directory size and the least free space seen.
func (g *diskGuard) stats() (peakSize, minFree int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peakSize, g.minFree
}

// loop checks every interval until ctx ends; the first check below the floor calls stop with
// its *LowDiskError and ends the loop.
func (g *diskGuard) loop(ctx context.Context, every time.Duration, stop func(error)) {
	poll.Every(ctx, every, func() bool {
		// A failing statfs (not expected on a directory the run created) skips the tick.
		var le *LowDiskError
		if err := g.check(); errors.As(err, &le) {
			le.During = true
			stop(le)
			return false
		}
		return true
	})
}

// dirSize sums the sizes of the regular files under dir (apparent size; segment files are
// written densely, so it is close to what du reports). Files that vanish meanwhile (retention,
// a segment roll) are skipped.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// diskGuardInterval is how often the disk guard checks the data dir's filesystem.
var diskGuardInterval = time.Second
