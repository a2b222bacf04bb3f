package workloads

import (
	"math"
	"strconv"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
)

// workerInfo is result.json worker: this worker, its measurement start and the least delays
// of every worker's records its consumers read.
func workerInfo(w load.Worker, cons []*load.Consumer, measureStart time.Time) *results.WorkerInfo {
	if !w.Active() {
		return nil
	}
	wi := &results.WorkerInfo{Index: w.K, Count: w.N, StartAt: w.StartAt.UTC(), MeasureStart: measureStart.UTC()}
	for k := 0; k < w.N; k++ {
		m := int64(math.MaxInt64)
		for _, c := range cons {
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
