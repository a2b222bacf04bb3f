package results

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// ConsumerGroup is the consumer-group part of a run whose consumers were members of one group
// (consumers.group.id): its rebalances during the measurement and the lag of its committed
// offsets, sampled during the measurement: per sample, the sum over partitions of
// (end offset - committed offset), in records. End-to-end latency in such a run is the time
// from intended send to a group member receiving the record, as OMB measures it.
type ConsumerGroup struct {
	ID       string `json:"id"`
	Members  int    `json:"members"`
	Balancer string `json:"balancer"`
	// Rebalances counts the rebalances completed during the measurement; RebalanceMs their
	// durations. Source says who measured them: "coordinator" (the embedded group
	// coordinator: PreparingRebalance -> Stable) or "clients" (generations the members saw;
	// no durations).
	Rebalances  int          `json:"rebalances"`
	RebalanceMs ValueSummary `json:"rebalance_ms"`
	Source      string       `json:"source"`
	// CommittedLag summarizes the committed-offset lag samples (records).
	CommittedLag ValueSummary `json:"committed_lag_records"`
}

// ValueSummary summarizes a small set of samples (nearest-rank percentiles).
type ValueSummary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// SummarizeValues returns the summary of vs (zero for none).
func SummarizeValues(vs []float64) ValueSummary {
	if len(vs) == 0 {
		return ValueSummary{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return ValueSummary{Count: len(s), Mean: sum / float64(len(s)), P50: rank(0.5), P99: rank(0.99), Max: s[len(s)-1]}
}

// printGroup prints the group line of the summary.
func printGroup(w io.Writer, g *ConsumerGroup) {
	reb := fmt.Sprintf("%d rebalances", g.Rebalances)
	if g.RebalanceMs.Count > 0 {
		reb += fmt.Sprintf(" (p50 %s ms, max %s ms)", FormatValue(g.RebalanceMs.P50), FormatValue(g.RebalanceMs.Max))
	}
	lag := "no samples"
	if c := g.CommittedLag; c.Count > 0 {
		lag = fmt.Sprintf("p50 %s, p99 %s, max %s records (%d samples)", FormatValue(c.P50), FormatValue(c.P99), FormatValue(c.Max), c.Count)
	}
	fmt.Fprintf(w, "group %s: %s members (%s), %s measured by the %s, committed-offset lag %s\n",
		g.ID, strconv.Itoa(g.Members), g.Balancer, reb, g.Source, lag)
}
