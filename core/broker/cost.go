package broker

import (
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/log"
)

// Counters are the cost counters of the brokers given them (Config.Counters), for the
// harness's cost accounting: whoever owns the brokers (an embedded cluster) owns their
// Counters, so two clusters in one process count apart. The zero value is ready; safe for
// concurrent use.
type Counters struct {
	// Log counts the system calls of the brokers' log writers (log.CountedWriter).
	Log log.Counters
	// applyNs is the time the followers spent applying replica fetch responses (appending the
	// records to the follower's log, updating its HW): the follower-side counterpart of the
	// leaders' request local time.
	applyNs atomic.Int64
}

// ApplyTime returns the total time the fetchers of the brokers counting in c have spent
// applying replica fetch responses (0 for a nil c).
func (c *Counters) ApplyTime() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.applyNs.Load())
}

func (c *Counters) countApply(d time.Duration) { c.applyNs.Add(int64(d)) }
