package netfetch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// EnsureOpenFiles makes sure this process may hold need open files: a broker keeps every
// segment file of every replica open (as Kafka does), so an embedded cluster of 10,000
// partitions with RF 3 needs 30,000 descriptors for its logs alone. It raises RLIMIT_NOFILE
// when it is lower (the hard limit too, which only a privileged process may do) and
// otherwise says what to do, rather than let the brokers fail their log directories with
// EMFILE half way through creating a topic. It returns the limit in effect.
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
	return lim.Cur, fmt.Errorf("this process needs about %d open files (brokers keep every segment file of every replica open) but may hold only %d (RLIMIT_NOFILE, hard limit %d) and cannot raise it: raise it (ulimit -n %d, or LimitNOFILE= for a service) or use fewer partitions",
		need, lim.Cur, lim.Max, need)
}
