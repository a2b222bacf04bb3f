package partition

import (
	"maps"
	"slices"
)

// ProducerStates returns a copy of every producer id's state this replica (leader or
// follower) tracks, by producer id: what DescribeProducers reports (Kafka's
// UnifiedLog.activeProducers). Safe for concurrent use.
func (r *Replica) ProducerStates() []ProducerInfo {
	ps := &r.producers
	ps.mu.Lock()
	ids := slices.Sorted(maps.Keys(ps.producers))
	ps.mu.Unlock()
	out := make([]ProducerInfo, 0, len(ids))
	for _, id := range ids {
		if info, ok := r.Producer(id); ok {
			out = append(out, info)
		}
	}
	return out
}
