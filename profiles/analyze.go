package profiles

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
)

// Load reads and parses a pprof file (gzipped or not).
func Load(file string) (*profile.Profile, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: not a pprof profile: %w", file, err)
	}
	if len(p.SampleType) == 0 {
		return nil, fmt.Errorf("profiles: %s: profile has no sample types", file)
	}
	return p, nil
}

// valueIndex picks the sample value pprof shows by default: the
// profile's default_sample_type, else the last one (cpu nanoseconds for a
// CPU profile, inuse_space for heap, delay for block/mutex).
func valueIndex(p *profile.Profile) int {
	if p.DefaultSampleType != "" {
		for i, st := range p.SampleType {
			if st.Type == p.DefaultSampleType {
				return i
			}
		}
	}
	return len(p.SampleType) - 1
}

const unknownFunc = "(unknown)"

// frames returns the function names of a sample's stack, leaf first
// (inlined frames expanded, innermost first, as pprof does).
func frames(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		if len(loc.Line) == 0 {
			out = append(out, fmt.Sprintf("0x%x", loc.Address))
			continue
		}
		for _, ln := range loc.Line {
			name := unknownFunc
			if ln.Function != nil && ln.Function.Name != "" {
				name = ln.Function.Name
			}
			out = append(out, name)
		}
	}
	return out
}

// funcStat is one function's flat (leaf) and cum (anywhere on the stack) value.
type funcStat struct {
	name      string
	flat, cum int64
}

// funcStats aggregates flat and cum per function over samples selected by keep (nil = all).
func funcStats(p *profile.Profile, vi int, keep func(*profile.Sample) bool) (stats []funcStat, total int64) {
	idx := map[string]int{}
	get := func(name string) *funcStat {
		i, ok := idx[name]
		if !ok {
			i = len(stats)
			idx[name] = i
			stats = append(stats, funcStat{name: name})
		}
		return &stats[i]
	}
	for _, s := range p.Sample {
		if keep != nil && !keep(s) {
			continue
		}
		v := s.Value[vi]
		total += v
		fr := frames(s)
		if len(fr) == 0 {
			continue
		}
		get(fr[0]).flat += v
		seen := make(map[string]bool, len(fr))
		for _, name := range fr {
			if !seen[name] {
				seen[name] = true
				get(name).cum += v
			}
		}
	}
	return stats, total
}

func sortStats(stats []funcStat, byCum bool) {
	slices.SortFunc(stats, func(a, b funcStat) int {
		if byCum {
			if c := cmp.Compare(b.cum, a.cum); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(b.flat, a.flat); c != 0 {
			return c
		}
		if c := cmp.Compare(b.cum, a.cum); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
}

// Top writes a table of the top n functions of file (n <= 0: all).
// by selects the ordering: "" or "flat" (self value), "cum" (value of samples
// with the function anywhere on the stack), or a pprof label key such as
// LabelRole or LabelBroker: then a table of each label value's share of the
// total comes first, followed by the top n functions (by flat) per value.
// Samples without the label are grouped as "(none)".
func Top(w io.Writer, file string, by string, n int) error {
	p, err := Load(file)
	if err != nil {
		return err
	}
	return top(w, filepath.Base(file), p, by, n)
}

func top(w io.Writer, name string, p *profile.Profile, by string, n int) error {
	vi := valueIndex(p)
	st := p.SampleType[vi]
	fmtv := valueFormatter(st.Unit)
	_, total := funcStats(p, vi, nil)
	fmt.Fprintf(w, "File: %s\n", name)
	fmt.Fprintf(w, "Type: %s (%s)\n", st.Type, st.Unit)
	if p.DurationNanos > 0 {
		fmt.Fprintf(w, "Duration: %s\n", time.Duration(p.DurationNanos).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "Total: %s in %d samples\n", fmtv(total), len(p.Sample))
	switch by {
	case "", "flat", "cum":
		stats, _ := funcStats(p, vi, nil)
		fmt.Fprintln(w)
		writeTopTable(w, stats, total, by == "cum", n, fmtv)
		return nil
	}
	// By label.
	shares := map[string]int64{}
	for _, s := range p.Sample {
		shares[labelValue(s, by)] += s.Value[vi]
	}
	values := make([]string, 0, len(shares))
	for v := range shares {
		values = append(values, v)
	}
	slices.SortFunc(values, func(a, b string) int {
		if c := cmp.Compare(shares[b], shares[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "\nShare by label %q:\n", by)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t%s\t%s\t\n", by, "value", "share")
	for _, v := range values {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", v, fmtv(shares[v]), pct(shares[v], total))
	}
	tw.Flush()
	if by == LabelRole || by == LabelBroker {
		writeSplit(w, p, fmtv)
	}
	for _, v := range values {
		stats, sub := funcStats(p, vi, func(s *profile.Sample) bool { return labelValue(s, by) == v })
		fmt.Fprintf(w, "\n%s=%s (%s, %s of total):\n", by, v, fmtv(sub), pct(sub, total))
		writeTopTable(w, stats, sub, false, n, fmtv)
	}
	return nil
}

func labelValue(s *profile.Sample, key string) string {
	if vs := s.Label[key]; len(vs) > 0 {
		return strings.Join(vs, ",")
	}
	if ns := s.NumLabel[key]; len(ns) > 0 {
		parts := make([]string, len(ns))
		for i, x := range ns {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	}
	return "(none)"
}

func writeTopTable(w io.Writer, stats []funcStat, total int64, byCum bool, n int, fmtv func(int64) string) {
	sortStats(stats, byCum)
	shown := len(stats)
	if n > 0 && n < shown {
		shown = n
	}
	order := "flat"
	if byCum {
		order = "cum"
	}
	fmt.Fprintf(w, "Showing top %d of %d functions by %s\n", shown, len(stats), order)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "flat\tflat%\tsum%\tcum\tcum%\t\n")
	var sum int64
	for _, s := range stats[:shown] {
		sum += s.flat
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t  %s\n", fmtv(s.flat), pct(s.flat, total), pct(sum, total), fmtv(s.cum), pct(s.cum, total), s.name)
	}
	tw.Flush()
}

func pct(v, total int64) string {
	if total == 0 {
		return "0.00%"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(v)/float64(total))
}

// valueFormatter renders values of a sample unit the way pprof does, roughly.
func valueFormatter(unit string) func(int64) string {
	switch unit {
	case "nanoseconds":
		return func(v int64) string { return formatDuration(v) }
	case "bytes":
		return formatBytes
	default:
		return func(v int64) string { return fmt.Sprint(v) }
	}
}

func formatDuration(ns int64) string {
	return formatScaled(ns, "0", []scale{{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}, {1, "ns"}})
}

func formatBytes(b int64) string {
	return formatScaled(b, trimFloat(0)+"B", []scale{{1 << 30, "GB"}, {1 << 20, "MB"}, {1 << 10, "kB"}, {1, "B"}})
}

// scale is a unit of formatScaled: values of at least at are shown divided by at.
type scale struct {
	at     float64
	suffix string
}

// formatScaled renders v in the first (largest) unit it reaches, as pprof does (two decimals,
// trailing zeros trimmed), zero as zero, the sign kept.
func formatScaled(v int64, zero string, units []scale) string {
	a := math.Abs(float64(v))
	s := zero
	for _, u := range units {
		if a > 0 && a >= u.at {
			s = trimFloat(a/u.at) + u.suffix
			break
		}
	}
	if v < 0 {
		return "-" + s
	}
	return s
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Diff writes the n functions (n <= 0: all) whose flat value grew most from
// base to new, largest growth first. As pprof -diff_base, base is scaled by
// -1 and merged with new, so a function's delta is new flat - base flat; the
// base and new columns show each side. The profiles must have the same
// sample types.
func Diff(w io.Writer, base, new string, n int) error {
	return DiffBy(w, base, new, n, false)
}

// DiffBy is Diff ranking by flat growth (cum false) or by cumulative growth (cum true: a
// function's own time plus its callees', so a path such as the copy path of a fetch response
// shows at the function that chose it, not only at the syscall it ends in).
func DiffBy(w io.Writer, base, new string, n int, cum bool) error {
	bp, err := Load(base)
	if err != nil {
		return err
	}
	np, err := Load(new)
	if err != nil {
		return err
	}
	return diff(w, filepath.Base(base), filepath.Base(new), bp, np, n, cum)
}

func diff(w io.Writer, baseName, newName string, bp, np *profile.Profile, n int, cum bool) error {
	if a, b := sampleTypes(bp), sampleTypes(np); a != b {
		return fmt.Errorf("profiles: %s and %s cannot be compared: sample types [%s] vs [%s]", baseName, newName, a, b)
	}
	neg := bp.Copy()
	neg.Scale(-1)
	merged, err := profile.Merge([]*profile.Profile{neg, np})
	if err != nil {
		return fmt.Errorf("profiles: merge %s and %s: %w", baseName, newName, err)
	}
	vi := valueIndex(np)
	st := np.SampleType[vi]
	fmtv := valueFormatter(st.Unit)
	deltas, dtotal := funcStats(merged, vi, nil)
	baseStats, btotal := funcStats(bp, vi, nil)
	newStats, ntotal := funcStats(np, vi, nil)
	val, by := func(s funcStat) int64 { return s.flat }, "flat"
	if cum {
		val, by = func(s funcStat) int64 { return s.cum }, "cum"
	}
	flatOf := func(stats []funcStat) map[string]int64 {
		m := make(map[string]int64, len(stats))
		for _, s := range stats {
			m[s.name] = val(s)
		}
		return m
	}
	bflat, nflat := flatOf(baseStats), flatOf(newStats)
	kept := deltas[:0] // functions whose ranked value did not change are left out
	for _, d := range deltas {
		if val(d) != 0 {
			kept = append(kept, d)
		}
	}
	deltas = kept
	slices.SortFunc(deltas, func(a, b funcStat) int {
		if c := cmp.Compare(val(b), val(a)); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	fmt.Fprintf(w, "Base: %s  New: %s\n", baseName, newName)
	fmt.Fprintf(w, "Type: %s (%s)\n", st.Type, st.Unit)
	fmt.Fprintf(w, "Total: base %s, new %s, delta %s (%s)\n", fmtv(btotal), fmtv(ntotal), signed(fmtv, dtotal), signedPct(dtotal, btotal))
	shown := len(deltas)
	if n > 0 && n < shown {
		shown = n
	}
	fmt.Fprintf(w, "Showing top %d of %d functions by %s growth\n", shown, len(deltas), by)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "delta\tdelta%\tbase\tnew\t\n")
	for _, d := range deltas[:shown] {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t  %s\n", signed(fmtv, val(d)), signedPct(val(d), btotal), fmtv(bflat[d.name]), fmtv(nflat[d.name]), d.name)
	}
	return tw.Flush()
}

func signed(fmtv func(int64) string, v int64) string {
	if v > 0 {
		return "+" + fmtv(v)
	}
	return fmtv(v)
}

// signedPct is v as a percentage of the base total.
func signedPct(v, baseTotal int64) string {
	if baseTotal == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.2f%%", 100*float64(v)/float64(baseTotal))
}

// Folded writes file's samples as folded stacks, one line per distinct
// stack: "root;caller;...;leaf value" (the default sample value; samples
// with value 0 are skipped), sorted by stack — the input format of
// flamegraph.pl and speedscope. Semicolons inside function names are
// replaced by ':'.
func Folded(w io.Writer, file string) error {
	p, err := Load(file)
	if err != nil {
		return err
	}
	return folded(w, p)
}

func folded(w io.Writer, p *profile.Profile) error {
	vi := valueIndex(p)
	counts := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[vi]
		if v == 0 {
			continue
		}
		fr := frames(s)
		if len(fr) == 0 {
			fr = []string{unknownFunc}
		}
		slices.Reverse(fr)
		for i, f := range fr {
			fr[i] = strings.NewReplacer(";", ":", "\n", " ").Replace(f)
		}
		counts[strings.Join(fr, ";")] += v
	}
	stacks := make([]string, 0, len(counts))
	for k := range counts {
		stacks = append(stacks, k)
	}
	slices.Sort(stacks)
	for _, k := range stacks {
		if _, err := fmt.Fprintf(w, "%s %d\n", k, counts[k]); err != nil {
			return err
		}
	}
	return nil
}

func sampleTypes(p *profile.Profile) string {
	parts := make([]string, len(p.SampleType))
	for i, st := range p.SampleType {
		parts[i] = st.Type + "/" + st.Unit
	}
	return strings.Join(parts, " ")
}
