package results

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// DefaultTableWidth is the width (characters, not bytes) every table fits by default; a
// table whose text would be wider folds its widest columns onto more lines (Table.Render).
const DefaultTableWidth = 120

// tableWidth is the width tables fit (SetTableWidth); 0 means DefaultTableWidth.
var tableWidth atomic.Int32

// SetTableWidth sets the width (characters) tables fit from now on: the terminal's when
// standard output is one (cmd/isrbench), DefaultTableWidth when n is smaller or unknown
// (<= 0). Safe for concurrent use.
func SetTableWidth(n int) {
	tableWidth.Store(int32(min(max(n, DefaultTableWidth), 1<<15)))
}

// TableWidth is the width tables fit now (characters).
func TableWidth() int {
	if n := tableWidth.Load(); n > 0 {
		return int(n)
	}
	return DefaultTableWidth
}

// Table is an isrbench table: rows appended, then rendered to fit TableWidth characters. Not
// safe for concurrent use.
type Table struct {
	w      io.Writer
	header []string
	rows   [][]string
	left   int // a second left-aligned column (a detail column), or -1
}

// NewTable returns a table with the headers as given (no upper-casing), first column left-aligned
// and the others right-aligned: the look of every isrbench table (results, gate).
func NewTable(w io.Writer, header ...string) *Table {
	return newTable(w, -1, header...)
}

// newTable is NewTable with column left (>= 0) left-aligned too (a detail column).
func newTable(w io.Writer, left int, header ...string) *Table {
	return &Table{w: w, header: header, left: left}
}

// Append adds a row (each cell formatted with fmt.Sprint).
func (t *Table) Append(cells ...any) error {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
	return nil
}

// Render writes the table. When its text would be wider than TableWidth characters, the
// widest columns are folded at spaces (cells and headers onto more lines), widest first,
// until it fits or no column folds further (a word is never split).
func (t *Table) Render() error {
	fitTable(t.header, t.rows, TableWidth())
	align := make([]tw.Align, len(t.header))
	for i := range align {
		align[i] = tw.AlignRight
	}
	align[0] = tw.AlignLeft
	if t.left >= 0 && t.left < len(align) {
		align[t.left] = tw.AlignLeft
	}
	tt := tablewriter.NewTable(t.w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight, PerColumn: align}),
	)
	tt.Header(toAny(t.header)...)
	for _, r := range t.rows {
		if err := tt.Append(toAny(r)...); err != nil {
			return err
		}
	}
	return tt.Render()
}

// tableTextWidth is the width of a table with columns this wide: borders and one space of
// padding each side.
func tableTextWidth(widths []int) int {
	n := 1
	for _, w := range widths {
		n += w + 3
	}
	return n
}

// fitTable folds the widest foldable column of header and rows, one character narrower at a
// time, until the table fits width characters or nothing folds further.
func fitTable(header []string, rows [][]string, width int) {
	stuck := make([]bool, len(header))
	// Each fold starts again from the text as given, so a column folded twice flows its words
	// into full lines instead of leaving the words pushed off one line each on their own.
	origHeader := slices.Clone(header)
	origRows := make([][]string, len(rows))
	for i, r := range rows {
		origRows[i] = slices.Clone(r)
	}
	for {
		widths := make([]int, len(header))
		for i := range header {
			widths[i] = textWidth(header[i])
			for _, r := range rows {
				if i < len(r) {
					widths[i] = max(widths[i], textWidth(r[i]))
				}
			}
		}
		if tableTextWidth(widths) <= width {
			return
		}
		col := -1
		for i, w := range widths {
			if !stuck[i] && (col < 0 || w > widths[col]) {
				col = i
			}
		}
		if col < 0 {
			return
		}
		target := max(widths[col]-1, 1)
		// Fold to the target; a column whose longest word is wider folds to that word.
		header[col] = wrapWords(origHeader[col], target)
		got := textWidth(header[col])
		for ri, r := range rows {
			if col < len(r) {
				r[col] = wrapWords(origRows[ri][col], target)
				got = max(got, textWidth(r[col]))
			}
		}
		if got >= widths[col] {
			stuck[col] = true
		}
	}
}

// textWidth is the width of s's longest line in characters.
func textWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, utf8.RuneCountInString(l))
	}
	return w
}

// wrapWords breaks s at spaces into lines of at most width characters (a longer word stays
// whole on its own line); existing line breaks are kept.
func wrapWords(s string, width int) string {
	lines := strings.Split(s, "\n")
	for li, line := range lines {
		if utf8.RuneCountInString(line) <= width {
			continue
		}
		var b strings.Builder
		n := 0
		for i, word := range strings.Fields(line) {
			wl := utf8.RuneCountInString(word)
			switch {
			case i == 0:
			case n+1+wl > width:
				b.WriteByte('\n')
				n = 0
			default:
				b.WriteByte(' ')
				n++
			}
			b.WriteString(word)
			n += wl
		}
		lines[li] = b.String()
	}
	return strings.Join(lines, "\n")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// FormatValue renders v with 4 significant digits and a k/M/G suffix ("52.13k", "812.0", "1.234M").
func FormatValue(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	if math.IsInf(v, 0) {
		if v > 0 {
			return "∞"
		}
		return "-∞"
	}
	a := math.Abs(v)
	suffix := ""
	switch {
	case a >= 1e9:
		v, suffix = v/1e9, "G"
	case a >= 1e6:
		v, suffix = v/1e6, "M"
	case a >= 1e4:
		v, suffix = v/1e3, "k"
	}
	a = math.Abs(v)
	prec := 0
	switch {
	case a == 0:
		prec = 0
	case a < 10:
		prec = 3
	case a < 100:
		prec = 2
	case a < 1000:
		prec = 1
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + suffix
}

// fmtUs renders a latency in µs: whole numbers below 10k as integers ("52", "9876"), the rest
// like FormatValue.
func fmtUs(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e4 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return FormatValue(v)
}

// PrintSummary prints one run's summary: throughput, latency percentiles (ack, HW lag, e2e, send
// delay), the cost per record when measured, ISR changes, errors by Kafka code, durability. The output contains no times of day, so
// it is stable for a given Result.
func PrintSummary(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s (%s) id=%s duration=%ss\n", orDash(r.Name), orDash(r.Target), orDash(r.ID), strconv.FormatFloat(r.DurationS, 'f', -1, 64))
	fmt.Fprintf(w, "produced: %d records, %d bytes, %s records/s, %s MB/s\n",
		r.Produced.Records, r.Produced.Bytes, FormatValue(r.Produced.RecordsPerSec), FormatValue(r.Produced.MBPerSec))

	t := NewTable(w, "latency (µs)", "count", "p50", "p90", "p99", "p99.9", "p99.99", "max", "mean")
	type row struct {
		name string
		s    Summary
	}
	rows := []row{{"ack", r.AckLatencyUs}}
	if r.Probe != nil {
		rows = append(rows, row{"ack, one at a time", r.Probe.AckLatencyUs})
	}
	rows = append(rows, row{"hw lag", r.HWLagUs})
	if r.HWLagClientUs != nil && r.HWLagClientSendUs != nil {
		rows = append(rows, row{"hw lag client", *r.HWLagClientUs}, row{"hw lag client from send", *r.HWLagClientSendUs})
	}
	rows = append(rows, row{"e2e", r.E2ELatencyUs})
	for _, h := range txnRows(r) {
		rows = append(rows, row{h.name, *h.s})
	}
	rows = append(rows, row{"send delay", r.SendDelayUs})
	for _, h := range rows {
		s := h.s
		if s.Count == 0 {
			t.Append(h.name, "0", "-", "-", "-", "-", "-", "-", "-")
			continue
		}
		t.Append(h.name, strconv.FormatInt(s.Count, 10), fmtUs(s.P50), fmtUs(s.P90), fmtUs(s.P99), fmtUs(s.P999), fmtUs(s.P9999), fmtUs(s.Max), fmtUs(s.Mean))
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: summary table: %w", err)
	}
	if o := r.HWObserver; o != nil {
		fmt.Fprintf(w, "hw lag client: resolution %s µs (p99 window; fetch.max.wait.ms %d, %d responses, %d showed an advance), %d records seen before their ack, %d unseen\n",
			FormatValue(o.ResolutionUs), o.FetchMaxWaitMs, o.Responses, o.Advances, o.SeenBeforeAck, o.Unseen)
	}
	printProbe(w, r)
	printTransactions(w, r.Transactions)
	if len(r.TargetConfig) > 0 {
		counts := map[string]int{}
		for _, ts := range r.TargetConfig {
			switch ts.How {
			case "already-set", "unverified", "create-topic":
				counts[ts.How]++
			default:
				fmt.Fprintf(w, "target: %s=%s on %s (%s)%s\n", ts.Config, ts.Value, ts.Resource, ts.How, reportedText(ts))
			}
		}
		fmt.Fprintf(w, "target settings: %d given at topic creation, %d already set, %d unverified (result.json target_config)\n",
			counts["create-topic"], counts["already-set"], counts["unverified"])
	}
	if err := printCost(w, r.Cost); err != nil {
		return err
	}
	if r.DamageFound > 0 {
		fmt.Fprintf(w, "damage: %d damaged batches found by the brokers (notes.damage)\n", r.DamageFound)
	}
	fmt.Fprintf(w, "isr: %d shrinks (leader-driven %d, controller-driven %d), %d expands (leader-driven), under-replicated %ss\n",
		r.ISR.Shrinks, r.ISR.LeaderShrinks, r.ISR.ControllerShrinks, r.ISR.Expands, strconv.FormatFloat(r.ISR.UnderReplicatedS, 'f', -1, 64))
	if len(r.Produced.Errors) > 0 {
		fmt.Fprintf(w, "errors: %s\n", joinSorted(r.Produced.Errors))
	} else {
		fmt.Fprintln(w, "errors: none")
	}
	d := r.Durability
	expired := ""
	if d.Expired > 0 {
		expired = fmt.Sprintf(", expired by retention %d", d.Expired)
	}
	fmt.Fprintf(w, "durability: acked %d, verified %d%s, lost %d, duplicated %d, out of order %d, replicas identical %v\n",
		d.Acked, d.Verified, expired, d.Lost, d.Duplicated, d.OutOfOrder, d.ReplicasIdentical)
	if len(d.ByAcks) > 0 {
		keys := make([]string, 0, len(d.ByAcks))
		for k := range d.ByAcks {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := d.ByAcks[k]
			fmt.Fprintf(w, "  acks=%s: acked %d, verified %d, lost %d, duplicated %d, out of order %d\n", k, c.Acked, c.Verified, c.Lost, c.Duplicated, c.OutOfOrder)
		}
	}
	if r.Group != nil {
		printGroup(w, r.Group)
	}
	for _, f := range r.Faults {
		line := fmt.Sprintf("fault: %s %s at %ss", f.Kind, f.Target, strconv.FormatFloat(f.AtS, 'f', 3, 64))
		if f.EndS != 0 {
			line += fmt.Sprintf(" until %ss", strconv.FormatFloat(f.EndS, 'f', 3, 64))
		}
		if f.Exec != nil {
			line += fmt.Sprintf(" exec exit %d", f.Exec.ExitCode)
		}
		if f.Undo != nil {
			line += fmt.Sprintf(", undo exit %d", f.Undo.ExitCode)
		}
		if len(f.CatchUpS) > 0 {
			longest := 0.0
			for _, s := range f.CatchUpS {
				longest = max(longest, s)
			}
			line += fmt.Sprintf(", %d partitions caught up, the last in %ss", len(f.CatchUpS), strconv.FormatFloat(longest, 'f', 3, 64))
		}
		if f.Error != "" {
			line += " FAILED: " + f.Error
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// PrintSweep prints one row per sweep point: the keys that vary between the results as columns,
// then records/s, MB/s, ack p50/p99/p99.9 (and the queueing factors when a result has a
// one-at-a-time probe: ack p50 and p99 over its p50), HW-lag p99 (and the client-observed
// HW-lag p99 when a result has it), e2e p99 (and commit p50/p99, LSO-lag p99 and read_committed
// e2e p99 when a result is transactional), ISR shrinks, errors, lost, and when any result
// measured cost, CPU µs and cluster system calls per record.
func PrintSweep(w io.Writer, rows []*Result) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no results")
		return err
	}
	varied := VariedKeys(rows)
	header := append([]string{"name"}, varied...)
	header = append(header, "records/s", "MB/s", "ack p50", "ack p99", "ack p99.9")
	queueing := false // the load's ack p50 and p99 over the one-at-a-time probe's p50
	for _, r := range rows {
		queueing = queueing || (r.Probe != nil && r.Probe.Queueing != nil)
	}
	if queueing {
		header = append(header, "queue p50", "queue p99")
	}
	header = append(header, "hw-lag p99")
	client := false // a column for the client-observed HW lag when some run has it
	for _, r := range rows {
		client = client || r.HWLagClientUs != nil
	}
	if client {
		header = append(header, "hw-lag client p99")
	}
	header = append(header, "e2e p99")
	txn := false // commit latency and LSO lag columns when some run is transactional
	for _, r := range rows {
		txn = txn || r.CommitLatencyUs != nil || r.LSOLagUs != nil
	}
	if txn {
		header = append(header, "commit p50", "commit p99", "lso-lag p99", "e2e-rc p99")
	}
	header = append(header, "isr shrinks", "errors", "lost")
	withCost := false
	for _, r := range rows {
		withCost = withCost || r.Cost != nil
	}
	if withCost {
		header = append(header, "cpu µs/rec", "syscalls/rec")
	}
	t := NewTable(w, header...)
	for _, r := range rows {
		cells := []string{orDash(r.Name)}
		for _, k := range varied {
			if v, ok := r.Config[k]; ok {
				cells = append(cells, configString(v))
			} else {
				cells = append(cells, "-")
			}
		}
		var errs int64
		for _, n := range r.Produced.Errors {
			errs += n
		}
		cells = append(cells, FormatValue(r.Produced.RecordsPerSec), FormatValue(r.Produced.MBPerSec),
			sumCell(r.AckLatencyUs, r.AckLatencyUs.P50), sumCell(r.AckLatencyUs, r.AckLatencyUs.P99), sumCell(r.AckLatencyUs, r.AckLatencyUs.P999))
		if queueing {
			if r.Probe != nil && r.Probe.Queueing != nil {
				cells = append(cells, fmtFactor(r.Probe.Queueing.AckP50X)+"x", fmtFactor(r.Probe.Queueing.AckP99X)+"x")
			} else {
				cells = append(cells, "-", "-")
			}
		}
		cells = append(cells, sumCell(r.HWLagUs, r.HWLagUs.P99))
		if client {
			if c := r.HWLagClientUs; c != nil {
				cells = append(cells, sumCell(*c, c.P99))
			} else {
				cells = append(cells, "-")
			}
		}
		cells = append(cells, sumCell(r.E2ELatencyUs, r.E2ELatencyUs.P99))
		if txn {
			cells = append(cells, optCell(r.CommitLatencyUs, 50), optCell(r.CommitLatencyUs, 99), optCell(r.LSOLagUs, 99), optCell(r.E2EReadCommittedUs, 99))
		}
		cells = append(cells, strconv.FormatInt(r.ISR.Shrinks, 10), strconv.FormatInt(errs, 10), strconv.FormatInt(r.Durability.Lost, 10))
		if withCost {
			cpu, sys := "-", "-"
			if r.Cost != nil {
				cpu = fmtCost(r.Cost.CPUUsPerRecord)
				if r.Cost.ClusterKnown() {
					sys = fmtCost(r.Cost.SyscallsTotal())
				}
			}
			cells = append(cells, cpu, sys)
		}
		t.Append(toAny(cells)...)
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: sweep table: %w", err)
	}
	_, err := fmt.Fprintln(w, "latencies in µs")
	return err
}

// optCell is the p50 or p99 of an optional histogram, "-" when absent or empty.
func optCell(s *Summary, q int) string {
	if s == nil {
		return "-"
	}
	if q == 50 {
		return sumCell(*s, s.P50)
	}
	return sumCell(*s, s.P99)
}

func sumCell(s Summary, v float64) string {
	if s.Count == 0 {
		return "-"
	}
	return fmtUs(v)
}

// PrintCompare prints a Report like benchstat: per configuration, one row per metric with the
// base and new medians ± their 95% CI (as a percentage of the median), the change ("~" when not
// significant or below the threshold) and "p=... n=...". Then notes and regressions.
func PrintCompare(w io.Writer, rep *Report) error {
	for i, g := range rep.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if g.Unmatched != "" {
			fmt.Fprintf(w, "%s: only in %s (%d runs)\n", g.Label, g.Unmatched, g.BaseRuns+g.NewRuns)
			continue
		}
		fmt.Fprintf(w, "%s: base %d runs, new %d runs\n", g.Label, g.BaseRuns, g.NewRuns)
		t := NewTable(w, "metric", "base", "new", "change", "p / n")
		for _, r := range g.Rows {
			change := r.Delta()
			if r.Regression {
				change += " (worse)"
			}
			stat := r.Stat()
			if r.Note != "" && !r.TooFew { // too few runs is said once, below the tables
				stat += " (" + r.Note + ")"
			}
			t.Append(r.Metric, fmtSide(r.Base, r.Unit), fmtSide(r.New, r.Unit), change, stat)
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("results: compare table: %w", err)
		}
	}
	PrintFindings(w, rep.Notes, rep.Regressions, rep.Alpha)
	return nil
}

// PrintFindings prints the notes of a comparison, then "no regression (alpha=…)" or one
// REGRESSION line per regression (results compare, isrbench gate).
func PrintFindings(w io.Writer, notes, regressions []string, alpha float64) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(regressions) == 0 {
		fmt.Fprintf(w, "no regression (alpha=%v)\n", alpha)
		return
	}
	for _, r := range regressions {
		fmt.Fprintf(w, "REGRESSION %s\n", r)
	}
}

// fmtSide: "52.13k rec/s ± 3%" (CI half-range as % of the median; "± ∞" with too few samples).
func fmtSide(s Side, unit string) string {
	if s.N == 0 {
		return "-"
	}
	return FormatInterval(s.Center, s.Lo, s.Hi, unit)
}

// FormatInterval renders a median with its confidence interval as "52.13k rec/s ± 3%": the
// interval's larger half as a percentage of the median, "± ∞" when a bound is infinite (too
// few samples), "± 0%" for a zero median.
func FormatInterval(center, lo, hi float64, unit string) string {
	v := FormatValue(center) + " " + unit
	switch {
	case math.IsInf(lo, 0) || math.IsInf(hi, 0):
		return v + " ± ∞"
	case center == 0:
		return v + " ± 0%"
	}
	pct := math.Max(center-lo, hi-center) / math.Abs(center) * 100
	return v + " ± " + strconv.FormatFloat(pct, 'f', 0, 64) + "%"
}

// reportedText is ", brokers report 0=2 1=2" for a target setting, or "".
func reportedText(ts TargetSetting) string {
	if len(ts.Reported) == 0 {
		return ""
	}
	return ", reported " + joinSorted(ts.Reported)
}

// joinSorted is m's entries as key=value, in key order, separated by spaces.
func joinSorted[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, " ")
}
