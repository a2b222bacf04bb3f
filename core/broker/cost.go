package broker

import (
	"sync/atomic"
	"time"
)

// applyTime counts the replica fetch responses the followers of this process applied and the
// time it took (appending the records to the follower's log, updating its HW): the follower-side
// counterpart of the leaders' request local time, for the harness's cost accounting.
var applyTime struct {
	responses, ns atomic.Int64
}

func countApply(d time.Duration) {
	applyTime.responses.Add(1)
	applyTime.ns.Add(int64(d))
}

// ApplyTime returns how many replica fetch responses the fetchers of every broker in this
// process applied so far, and the total time applying them took. Safe for concurrent use.
func ApplyTime() (responses int64, total time.Duration) {
	return applyTime.responses.Load(), time.Duration(applyTime.ns.Load())
}
