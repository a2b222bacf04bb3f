package log

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrClosed is returned by calls on a closed Log (after Close or Abandon). It wraps
// kerr.KafkaStorageError.
var ErrClosed = fmt.Errorf("log: closed: %w", kerr.KafkaStorageError)

// ErrTooManyOpenFiles is wrapped by the errors of operations that could not open or create a
// file because the process (EMFILE) or the system (ENFILE) has no file descriptor left.
//
// It is a resource error, not a disk failure: the operation fails and nothing else does. The
// Log stays usable (a failed segment roll fails that append; the next append tries the roll
// again) and the log directory stays online. Such errors also wrap kerr.RequestTimedOut,
// the code a produce answers with: every Kafka client retries it without concluding that
// the leader moved or its disk failed (KAFKA_STORAGE_ERROR would say the log directory is
// offline, NOT_ENOUGH_REPLICAS would blame the ISR), and since nothing of the failed
// request was appended, an idempotent producer's retry does not duplicate anything.
var ErrTooManyOpenFiles = errors.New("too many open files: raise the file limit (ulimit -n) or host fewer partitions")

// ErrOutOfKernelMemory is wrapped, like ErrTooManyOpenFiles and with the same consequences,
// by the errors of operations that failed with ENOMEM: the kernel could not allocate what
// opening a file needs.
var ErrOutOfKernelMemory = errors.New("out of kernel memory: free memory or host fewer partitions")

// IsResourceError reports whether err is a resource error rather than a disk failure: it
// wraps ErrTooManyOpenFiles or ErrOutOfKernelMemory, or the errno behind them (EMFILE,
// ENFILE, ENOMEM).
func IsResourceError(err error) bool { return resourceSentinel(err) != nil }

// resourceSentinel returns the sentinel of the resource error err is, or nil.
func resourceSentinel(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTooManyOpenFiles), errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return ErrTooManyOpenFiles
	case errors.Is(err, ErrOutOfKernelMemory), errors.Is(err, syscall.ENOMEM):
		return ErrOutOfKernelMemory
	}
	return nil
}

// IOError describes the failure of a file operation, for callers that decide by it whether
// the log directory failed (the broker's checkpoints and replica directories, the leader
// epoch checkpoint): a resource error (IsResourceError) comes back wrapping its sentinel and
// kerr.RequestTimedOut, which leaves the directory online; any other error wraps
// kerr.KafkaStorageError, which takes it offline. what says what was being done ("write
// HW checkpoint /data/replication-offset-checkpoint"); err is kept (errors.Is finds it).
func IOError(what string, err error) error {
	if s := resourceSentinel(err); s != nil {
		if errors.Is(err, s) {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%s: %w: %w: %w", what, err, s, kerr.RequestTimedOut)
	}
	return fmt.Errorf("%s: %w: %w", what, err, kerr.KafkaStorageError)
}

func configErrorf(format string, args ...any) error {
	return fmt.Errorf("log: "+format+": %w", append(args, kerr.InvalidConfig)...)
}
