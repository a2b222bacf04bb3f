package netfetch

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FileLimit is what RaiseFileLimit did to RLIMIT_NOFILE. A plain value.
type FileLimit struct {
	From, To uint64 // the soft limit before and after (equal when it could not be raised)
	Hard     uint64 // the hard limit
	Brokers  int    // the brokers of this process, sharing it
	Replicas int64  // the partition replicas they may host with it (ReplicaCapacity)
}

func (f FileLimit) String() string {
	hosts := fmt.Sprintf("this process can host about %d partition replicas (%d brokers)", f.Replicas, f.Brokers)
	if f.Replicas == math.MaxInt64 {
		hosts = fmt.Sprintf("its logs keep at most %d segment files open, so it does not bound the partition replicas this process can host (%d brokers)", LogFiles, f.Brokers)
	}
	if f.To > f.From {
		return fmt.Sprintf("file limit raised from %d to %d (hard limit %d); %s", f.From, f.To, f.Hard, hosts)
	}
	return fmt.Sprintf("file limit %d (hard limit %d); %s", f.To, f.Hard, hosts)
}

// RaiseFileLimit raises RLIMIT_NOFILE for a process that hosts brokers brokers, and says what
// it can host with it. A privileged process (CAP_SYS_RESOURCE, as root) raises the hard limit
// too, to PrivilegedFileLimit or the kernel's fs.nr_open if lower: Kafka's brokers are run with
// such limits (each partition replica keeps its segment files open). Otherwise the soft
// limit is raised to the hard limit, all an unprivileged process may do (Go's runtime does so
// at start on Linux; this restores it when something lowered it since). A hard limit of
// "unlimited" is capped by fs.nr_open.
func RaiseFileLimit(brokers int) (FileLimit, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return FileLimit{}, fmt.Errorf("file limit: %w", err)
	}
	fl := FileLimit{From: lim.Cur, To: lim.Cur, Hard: lim.Max, Brokers: brokers}
	target := uint64(PrivilegedFileLimit)
	if n, ok := nrOpen(); ok && n < target {
		target = n
	}
	if lim.Cur < target && lim.Max != unix.RLIM_INFINITY && lim.Max < target {
		// Raising the hard limit needs privilege: EPERM otherwise, and then the soft limit
		// goes up to the hard one below.
		want := unix.Rlimit{Cur: target, Max: target}
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) == nil {
			fl.To, fl.Hard = target, target
			fl.Replicas, _ = ReplicaCapacity(brokers)
			return fl, nil
		}
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want)
		if err != nil && lim.Max == unix.RLIM_INFINITY {
			if n, ok := nrOpen(); ok && n > lim.Cur {
				want.Cur = n
				err = unix.Setrlimit(unix.RLIMIT_NOFILE, &want)
			}
		}
		if err != nil {
			fl.Replicas, _ = ReplicaCapacity(brokers)
			return fl, fmt.Errorf("raise the file limit from %d to the hard limit %d: %w", lim.Cur, lim.Max, err)
		}
		fl.To = want.Cur
	}
	fl.Replicas, _ = ReplicaCapacity(brokers)
	return fl, nil
}

// PrivilegedFileLimit is the RLIMIT_NOFILE a privileged RaiseFileLimit sets (at most the
// kernel's fs.nr_open).
const PrivilegedFileLimit = 1 << 20

// nrOpen is the kernel's fs.nr_open: the most RLIMIT_NOFILE may be.
func nrOpen() (uint64, bool) {
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// EnsureOpenFiles makes sure this process may hold need open files (FilesForReplicas says
// how many the replicas of a run need: one each for its active segment, besides the
// connections and the headroom). It raises RLIMIT_NOFILE when it is lower (the hard limit
// too, which only a privileged process may do) and otherwise says what to do, rather than
// let the controller refuse the run's topics half way. It returns the limit in effect.
func EnsureOpenFiles(need uint64) (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("open file limit: %w", err)
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	want := lim
	want.Cur = need
	if want.Max < need {
		want.Max = need
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err == nil {
		return need, nil
	}
	if lim.Max > lim.Cur { // at least up to the hard limit
		up := lim
		up.Cur = lim.Max
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &up) == nil {
			lim.Cur = lim.Max
		}
	}
	return lim.Cur, fmt.Errorf("this process needs about %d open files (for the client connections and the segment files of the partition replicas) but may hold only %d (RLIMIT_NOFILE, hard limit %d) and cannot raise it: raise it (ulimit -n %d, or LimitNOFILE= for a service) or use fewer partitions",
		need, lim.Cur, lim.Max, need)
}
