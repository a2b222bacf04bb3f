package workloads

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// groupProbe measures a run's consumer group: rebalances during the measurement (from the
// embedded coordinator's counters where the target has them, else the generations the
// members saw) and the committed-offset lag, sampled every second.
type groupProbe struct {
	spec  *spec.Spec
	stats target.GroupStatser // nil: the target cannot read its coordinator's counters
	adm   *kadm.Client
	start group.Stats
	hasSt bool
	mu    struct {
		sync.Mutex
		lag []float64
	}
}

func newGroupProbe(s *spec.Spec, stats target.GroupStatser, adm *kadm.Client) *groupProbe {
	return &groupProbe{spec: s, stats: stats, adm: adm}
}

// markStart snapshots the coordinator's counters at the start of measurement.
func (g *groupProbe) markStart() {
	if gs := g.stats; gs != nil {
		g.start, g.hasSt = gs.GroupStats(g.spec.Consumers.GroupID)
	}
}

// sampleLag records the committed-offset lag every interval until ctx ends.
func (g *groupProbe) sampleLag(ctx context.Context, interval time.Duration) {
	poll.Every(ctx, interval, func() bool {
		lag, err := g.lag(ctx)
		if err != nil {
			return true // a failed sample (coordinator moving) is skipped, not zero
		}
		g.mu.Lock()
		g.mu.lag = append(g.mu.lag, float64(lag))
		g.mu.Unlock()
		return true
	})
}

// lag is the sum over partitions of end offset - committed offset (the whole partition from
// its log start when nothing is committed).
func (g *groupProbe) lag(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topic := g.spec.Topic.Name
	committed, err := g.adm.FetchOffsets(ctx, g.spec.Consumers.GroupID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return 0, err
	}
	ends, err := g.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, err
	}
	starts, err := g.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, err
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		from := int64(0)
		if s, ok := starts.Lookup(topic, o.Partition); ok {
			from = s.Offset
		}
		if c, ok := committed.Lookup(topic, o.Partition); ok && c.At >= 0 {
			from = c.At
		}
		total += max(o.Offset-from, 0)
	})
	return total, nil
}

// result builds result.json's group section after the run; mStart, mEnd bound the
// measurement.
func (g *groupProbe) result(cons []*load.Consumer, mStart, mEnd time.Time) *results.ConsumerGroup {
	s := g.spec
	out := &results.ConsumerGroup{ID: s.Consumers.GroupID, Members: len(cons), Balancer: s.Consumers.GroupBalancer}
	g.mu.Lock()
	out.CommittedLag = results.SummarizeValues(g.mu.lag)
	g.mu.Unlock()
	if gs := g.stats; gs != nil {
		if end, ok := gs.GroupStats(s.Consumers.GroupID); ok {
			out.Source = "coordinator"
			n := end.Rebalances
			if g.hasSt && end.Rebalances >= g.start.Rebalances {
				n = end.Rebalances - g.start.Rebalances // else the coordinator moved: its counters started anew
			}
			n = min(n, len(end.RebalanceMs))
			out.Rebalances = n
			out.RebalanceMs = results.SummarizeValues(end.RebalanceMs[len(end.RebalanceMs)-n:])
			return out
		}
	}
	out.Source = "clients"
	gens := map[int32]bool{}
	for _, c := range cons {
		c.Generations(mStart, mEnd, gens)
	}
	out.Rebalances = len(gens)
	return out
}
