package broker

import (
	"sync/atomic"
	"time"
)

// applyNs is the time the followers of this process spent applying replica fetch responses
// (appending the records to the follower's log, updating its HW): the follower-side
// counterpart of the leaders' request local time, for the harness's cost accounting.
var applyNs atomic.Int64

func countApply(d time.Duration) { applyNs.Add(int64(d)) }

// ApplyTime returns the total time the fetchers of every broker in this process have spent
// applying replica fetch responses. Safe for concurrent use.
func ApplyTime() time.Duration { return time.Duration(applyNs.Load()) }
