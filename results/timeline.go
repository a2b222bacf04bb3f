package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// TimelineColumns are the fixed leading columns of timeline.csv.
var TimelineColumns = []string{
	"t_s", "records_per_s", "mb_per_s", "ack_p99_us", "hw_lag_p99_us",
	"isr_min", "isr_max", "under_replicated", "under_min_isr", "errors",
}

// TimelineRow is one interval of timeline.csv. T is the interval's end in seconds since the
// measured start; rates are over the interval; ISR sizes are min/max over partitions at T.
type TimelineRow struct {
	T               float64
	RecordsPerS     float64
	MBPerS          float64
	AckP99Us        float64
	HWLagP99Us      float64
	ISRMin, ISRMax  int
	UnderReplicated int   // UnderReplicatedPartitions at T
	UnderMinISR     int   // UnderMinIsrPartitionCount at T
	Errors          int64 // failed records in the interval
	// Extra holds the values of the extra columns, in the order given to NewTimeline
	// (e.g. per-partition leader, epoch, HW, LEO). Scalars only; printed with %v (floats 'g').
	Extra []any
}

// Timeline writes timeline.csv: TimelineColumns followed by extra columns fixed at creation.
// It also keeps the rows (without Extra) for plotting. One goroutine writes to a Timeline.
type Timeline struct {
	w     *csv.Writer
	extra []string
	rows  []TimelineRow
	rec   []string
}

// NewTimeline writes the header (TimelineColumns + extra) to w.
func NewTimeline(w io.Writer, extra ...string) (*Timeline, error) {
	seen := map[string]bool{}
	for _, c := range append(append([]string(nil), TimelineColumns...), extra...) {
		if c == "" {
			return nil, fmt.Errorf("results: timeline: empty column name")
		}
		if seen[c] {
			return nil, fmt.Errorf("results: timeline: duplicate column %q", c)
		}
		seen[c] = true
	}
	t := &Timeline{w: csv.NewWriter(w), extra: append([]string(nil), extra...)}
	if err := t.w.Write(append(append([]string(nil), TimelineColumns...), extra...)); err != nil {
		return nil, fmt.Errorf("results: timeline header: %w", err)
	}
	return t, nil
}

// Write appends one row; len(row.Extra) must equal the number of extra columns.
func (t *Timeline) Write(row TimelineRow) error {
	if len(row.Extra) != len(t.extra) {
		return fmt.Errorf("results: timeline row at t=%v has %d extra values, want %d (%v)", row.T, len(row.Extra), len(t.extra), t.extra)
	}
	rec := t.rec[:0]
	rec = append(rec,
		fmtF(row.T), fmtF(row.RecordsPerS), fmtF(row.MBPerS), fmtF(row.AckP99Us), fmtF(row.HWLagP99Us),
		strconv.Itoa(row.ISRMin), strconv.Itoa(row.ISRMax), strconv.Itoa(row.UnderReplicated),
		strconv.Itoa(row.UnderMinISR), strconv.FormatInt(row.Errors, 10))
	for _, v := range row.Extra {
		switch x := v.(type) {
		case float64:
			rec = append(rec, fmtF(x))
		case float32:
			rec = append(rec, fmtF(float64(x)))
		case nil:
			rec = append(rec, "")
		default:
			rec = append(rec, fmt.Sprint(x))
		}
	}
	t.rec = rec
	if err := t.w.Write(rec); err != nil {
		return fmt.Errorf("results: timeline: %w", err)
	}
	row.Extra = nil
	t.rows = append(t.rows, row)
	return nil
}

// Flush flushes buffered rows to the writer.
func (t *Timeline) Flush() error {
	t.w.Flush()
	if err := t.w.Error(); err != nil {
		return fmt.Errorf("results: timeline: %w", err)
	}
	return nil
}

// Rows returns the rows written so far (without their Extra values).
func (t *Timeline) Rows() []TimelineRow { return t.rows }

func fmtF(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// ReadTimeline parses a timeline.csv written by Timeline: the fixed columns into rows (Extra as
// strings) and the extra column names. Errors name the line and column.
func ReadTimeline(r io.Reader) (rows []TimelineRow, extra []string, err error) {
	cr := csv.NewReader(r)
	hdr, err := cr.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("results: timeline header: %w", err)
	}
	if len(hdr) < len(TimelineColumns) {
		return nil, nil, fmt.Errorf("results: timeline header has %d columns, want at least %d (%v)", len(hdr), len(TimelineColumns), TimelineColumns)
	}
	for i, c := range TimelineColumns {
		if hdr[i] != c {
			return nil, nil, fmt.Errorf("results: timeline header column %d is %q, want %q", i+1, hdr[i], c)
		}
	}
	extra = hdr[len(TimelineColumns):]
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, extra, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("results: timeline: %w", err)
		}
		var row TimelineRow
		f := func(i int) float64 {
			if err != nil {
				return 0
			}
			var v float64
			v, err = strconv.ParseFloat(rec[i], 64)
			if err != nil {
				err = fmt.Errorf("results: timeline line %d column %s: %q is not a number", line, TimelineColumns[i], rec[i])
			}
			return v
		}
		row.T, row.RecordsPerS, row.MBPerS, row.AckP99Us, row.HWLagP99Us = f(0), f(1), f(2), f(3), f(4)
		row.ISRMin, row.ISRMax, row.UnderReplicated, row.UnderMinISR = int(f(5)), int(f(6)), int(f(7)), int(f(8))
		row.Errors = int64(f(9))
		if err != nil {
			return nil, nil, err
		}
		for _, s := range rec[len(TimelineColumns):] {
			row.Extra = append(row.Extra, s)
		}
		rows = append(rows, row)
	}
}
