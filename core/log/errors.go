package log

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrClosed is returned by calls on a closed Log (after Close or Abandon). It wraps
// kerr.KafkaStorageError.
var ErrClosed = fmt.Errorf("log: closed: %w", kerr.KafkaStorageError)

func configErrorf(format string, args ...any) error {
	return fmt.Errorf("log: "+format+": %w", append(args, kerr.InvalidConfig)...)
}
