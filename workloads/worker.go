package workloads

import (
	"math"
	"strconv"
	"time"

	"github.com/isrbench/isrbench/results"
)

// workerInfo is result.json worker: this worker, its measurement start and the least delays
// of every worker's records its consumers read.
func (r *rig) workerInfo(measureStart time.Time) *results.WorkerInfo {
	w := r.opts.Worker
	if !w.Active() {
		return nil
	}
	wi := &results.WorkerInfo{Index: w.K, Count: w.N, StartAt: w.StartAt.UTC(), MeasureStart: measureStart.UTC()}
	for k := 0; k < w.N; k++ {
		m := int64(math.MaxInt64)
		for _, c := range r.cons {
			if c.Peers != nil {
				m = min(m, c.Peers.Min(k))
			}
		}
		if m != math.MaxInt64 {
			if wi.PeerDelayMinUs == nil {
				wi.PeerDelayMinUs = map[string]float64{}
			}
			wi.PeerDelayMinUs[strconv.Itoa(k+1)] = float64(m) / 1e3
		}
	}
	return wi
}
