package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// PartitionsColumns are the columns of partitions.csv.
var PartitionsColumns = []string{"t_s", "partition", "leader", "leader_epoch", "replicas", "isr", "hw", "leo",
	"under_replicated", "under_min_isr", "produce_errors", "log_start"}

// PartitionRow is one partition at one sample of partitions.csv.
type PartitionRow struct {
	T           float64 // seconds since the start of measurement
	Partition   int32
	Leader      int32 // -1 = no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	HW          int64 // the leader's HW (exclusive); -1 without a leader
	// LEO is each running replica's LEO (exclusive): the leo column lists every replica as
	// id:LEO, id:- for one that is not running, id:n/a for all of them when NoLEO is set (the
	// target cannot see a replica's LEO).
	LEO   map[int32]int64
	NoLEO bool
	// UnderReplicated: the ISR is smaller than the replica set; UnderMinISR: smaller than
	// min.insync.replicas.
	UnderReplicated, UnderMinISR bool
	// ProduceErrors counts the records of the partition that failed since the previous
	// sample, by error name (only counts > 0 are listed).
	ProduceErrors map[string]int64
	LogStart      int64 // the leader's log start (inclusive); -1 without a leader
}

// PartitionsCSV writes partitions.csv. One goroutine writes to it; a write error sticks and
// is returned by Flush.
type PartitionsCSV struct{ w *csv.Writer }

// NewPartitionsCSV writes the header (PartitionsColumns) to w.
func NewPartitionsCSV(w io.Writer) *PartitionsCSV {
	c := &PartitionsCSV{w: csv.NewWriter(w)}
	_ = c.w.Write(PartitionsColumns) // an error sticks in the csv.Writer: Flush reports it
	return c
}

// Write appends one row.
func (c *PartitionsCSV) Write(r PartitionRow) {
	var leo []string
	for _, id := range r.Replicas {
		if r.NoLEO {
			leo = append(leo, fmt.Sprintf("%d:n/a", id))
		} else if v, ok := r.LEO[id]; ok {
			leo = append(leo, fmt.Sprintf("%d:%d", id, v))
		} else {
			leo = append(leo, fmt.Sprintf("%d:-", id))
		}
	}
	var errs []string
	for code, n := range r.ProduceErrors {
		if n > 0 {
			errs = append(errs, fmt.Sprintf("%s=%d", code, n))
		}
	}
	sort.Strings(errs)
	_ = c.w.Write([]string{strconv.FormatFloat(r.T, 'f', 3, 64), strconv.Itoa(int(r.Partition)), strconv.Itoa(int(r.Leader)),
		strconv.Itoa(int(r.LeaderEpoch)), brokerList(r.Replicas), brokerList(r.ISR), strconv.FormatInt(r.HW, 10), strings.Join(leo, " "),
		flag01(r.UnderReplicated), flag01(r.UnderMinISR), strings.Join(errs, " "), strconv.FormatInt(r.LogStart, 10)})
}

// Flush flushes buffered rows to the writer and returns the first write error.
func (c *PartitionsCSV) Flush() error {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("results: partitions: %w", err)
	}
	return nil
}

// brokerList is "1 2 3".
func brokerList(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, " ")
}

func flag01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
