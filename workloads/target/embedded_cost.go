package target

import "github.com/isrbench/isrbench/cluster"

// CostCounter is implemented by a target whose cluster runs in this process (embedded): Cost
// reads that cluster's own cost counters (system calls, bytes, requests, request times), which
// no other cluster of the process adds to.
type CostCounter interface {
	Cost() cluster.Cost
}

// Cost returns the embedded cluster's cost counters so far. Safe for concurrent use.
func (e *embedded) Cost() cluster.Cost { return e.c.Cost() }
