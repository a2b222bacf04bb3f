package results

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"
)

// Metric is one number of a result that compare/gate tests. Get returns ok=false when the
// result has no such value (e.g. an empty e2e histogram): the result is then not a sample.
type Metric struct {
	Name         string // "records/s", "p99-ack", ...
	Unit         string // shown after values: "rec/s", "MB/s", "µs"
	HigherBetter bool
	Get          func(*Result) (float64, bool)
}

// DefaultMetrics are the metrics compare and gate test when none are named: throughput,
// latency, and the cost: CPU per record, the cluster's request handlers' local time per record
// (local/rec: working, not waiting, so it moves with the code's CPU and not with the idle
// overhead whole-process CPU also counts), and CPU, allocations and the cluster's system calls
// per request the leaders handled, which stay steadier between identical runs than per record
// (a loaded machine makes the producers batch more records per request).
var DefaultMetrics = []string{"records/s", "MB/s", "p50-ack", "p99-ack", "p999-ack", "p99-hwlag", "p99-e2e",
	"p50-commit", "p99-commit", "p99-lsolag", "p99-e2erc",
	"cpu/rec", "local/rec", "cpu/req", "allocs/req", "syscalls/req"}

// Metrics lists every known metric by name: records/s, MB/s, <stat>-<hist> for stat in mean,
// p50, p90, p99, p999, p9999, max and hist in ack, hwlag, e2e, senddelay and a transactional
// run's commit, lsolag, e2erc (TxnHists), and the cost per
// record (result.json cost): cpu/rec, cpu-user/rec, cpu-sys/rec, cpu-cluster/rec,
// cpu-clients/rec, gc-cpu/rec, local/rec, produce-local/rec (µs), allocs/rec, alloc-bytes/rec,
// ctxsw/rec, runq-wait/rec (µs the process's threads waited for a CPU), syscalls/rec,
// produce-reqs/rec, fetch-reqs/rec, copied-bytes/rec, and per request the leaders handled
// cpu/req (µs), allocs/req, syscalls/req; and of the one-at-a-time probe (result.json probe)
// p50-probe (µs), queue-p50 and queue-p99 (the load's ack p50 and p99 over the probe's p50).
func Metrics() map[string]Metric {
	m := map[string]Metric{
		"records/s": {Name: "records/s", Unit: "rec/s", HigherBetter: true, Get: func(r *Result) (float64, bool) {
			return r.Produced.RecordsPerSec, r.Produced.Records > 0 || r.Produced.RecordsPerSec > 0
		}},
		"MB/s": {Name: "MB/s", Unit: "MB/s", HigherBetter: true, Get: func(r *Result) (float64, bool) {
			return r.Produced.MBPerSec, r.Produced.Bytes > 0 || r.Produced.MBPerSec > 0
		}},
	}
	hists := []struct {
		name string
		get  func(*Result) *Summary
	}{
		{"ack", func(r *Result) *Summary { return &r.AckLatencyUs }},
		{"hwlag", func(r *Result) *Summary { return &r.HWLagUs }},
		{"e2e", func(r *Result) *Summary { return &r.E2ELatencyUs }},
		{"senddelay", func(r *Result) *Summary { return &r.SendDelayUs }},
	}
	for _, h := range TxnHists { // a transactional run's: absent elsewhere (not a sample)
		get := h.Get
		hists = append(hists, struct {
			name string
			get  func(*Result) *Summary
		}{h.Metric, func(r *Result) *Summary {
			if s := get(r); s != nil {
				return s
			}
			return &Summary{}
		}})
	}
	stats := []struct {
		name string
		get  func(*Summary) float64
	}{
		{"mean", func(s *Summary) float64 { return s.Mean }},
		{"p50", func(s *Summary) float64 { return s.P50 }},
		{"p90", func(s *Summary) float64 { return s.P90 }},
		{"p99", func(s *Summary) float64 { return s.P99 }},
		{"p999", func(s *Summary) float64 { return s.P999 }},
		{"p9999", func(s *Summary) float64 { return s.P9999 }},
		{"max", func(s *Summary) float64 { return s.Max }},
	}
	for _, c := range costMetrics() {
		m[c.Name] = c
	}
	for _, c := range probeMetrics() {
		m[c.Name] = c
	}
	for _, h := range hists {
		for _, s := range stats {
			h, s := h, s
			name := s.name + "-" + h.name
			m[name] = Metric{Name: name, Unit: "µs", Get: func(r *Result) (float64, bool) {
				sum := h.get(r)
				return s.get(sum), sum.Count > 0
			}}
		}
	}
	return m
}

// MetricNames returns the sorted names of all known metrics.
func MetricNames() []string {
	var names []string
	for n := range Metrics() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CompareOptions configures Compare. Zero values take the defaults.
type CompareOptions struct {
	Metrics    []string           // default DefaultMetrics
	Alpha      float64            // significance level, default 0.05
	Alphas     map[string]float64 // per-metric Alpha overrides (a steady metric can afford a larger one)
	Confidence float64            // CI level, default 0.95
	MinChange  float64            // minimum |change| (fraction, 0.05 = 5%) to call a regression, default 0.05
	Thresholds map[string]float64 // per-metric MinChange overrides (fraction)
}

func (o *CompareOptions) defaults() {
	if len(o.Metrics) == 0 {
		o.Metrics = DefaultMetrics
	}
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.Confidence <= 0 {
		o.Confidence = 0.95
	}
	if o.MinChange <= 0 {
		o.MinChange = 0.05
	}
}

// Side summarizes one side's samples of a metric.
type Side struct {
	N              int
	Values         []float64 // ascending
	Center, Lo, Hi float64   // median and its CI (Lo/Hi may be ±Inf with too few samples)
}

// Row is one metric of one group.
type Row struct {
	Metric       string
	Unit         string
	HigherBetter bool
	Base, New    Side
	ChangePct    float64 // (new-base)/base*100 of the medians; ±Inf when base is 0
	P            float64 // Mann-Whitney U two-sided p-value (1 when not computed)
	Alpha        float64 // the metric's significance level
	Significant  bool    // P < Alpha
	TooFew       bool    // even fully separated samples of these sizes cannot reach Alpha
	Threshold    float64 // min |change| fraction for this metric
	Worse        bool    // change in the bad direction
	Regression   bool    // Worse && Significant && |change| > Threshold && !TooFew
	Note         string  // e.g. "need >= 4 runs per side for alpha=0.05", "no samples in new"
}

// Delta is the change column: "~" when not significant or below the threshold, else "+12.3%".
func (r Row) Delta() string {
	if r.Base.N == 0 || r.New.N == 0 || r.TooFew || !r.Significant || math.Abs(r.ChangePct) <= r.Threshold*100 {
		return "~"
	}
	return fmtPct(r.ChangePct)
}

// Stat is the p/n column: "p=0.008 n=5+5".
func (r Row) Stat() string {
	if r.Base.N == 0 || r.New.N == 0 {
		return fmt.Sprintf("n=%d+%d", r.Base.N, r.New.N)
	}
	return fmt.Sprintf("p=%.3f n=%d+%d", r.P, r.Base.N, r.New.N)
}

// Why is the one-line reason of a regression: "p99-ack: +31.2% (p=0.008, n=5+5) exceeds 5%".
func (r Row) Why() string {
	return fmt.Sprintf("%s: %s (p=%.3f, n=%d+%d) exceeds %s", r.Metric, fmtPct(r.ChangePct), r.P, r.Base.N, r.New.N, fmtThreshold(r.Threshold))
}

// GroupReport is the comparison of one configuration.
type GroupReport struct {
	Label     string // group label (name + varied keys)
	BaseRuns  int
	NewRuns   int
	Rows      []Row
	Unmatched string // "base" or "new" when the group exists on one side only (Rows empty)
}

// Report is the result of Compare.
type Report struct {
	Alpha       float64
	Confidence  float64
	Groups      []GroupReport
	Regressions []string // one Why line per regression, prefixed with the group label when there are several groups
	Notes       []string // plain-language caveats (too few runs, paired mismatched configs)
}

// Regressed reports whether any metric regressed.
func (r *Report) Regressed() bool { return len(r.Regressions) > 0 }

// Compare groups base and new results into configurations (GroupResults), pairs groups with the
// same key (or the only group on each side when there is one each), and tests each metric with
// benchmath.AssumeNothing: medians with CIs, Mann-Whitney U p-value. A regression is a change in
// the worse direction that is significant (p < alpha) and larger than the metric's threshold.
// Unknown metric names are an error.
func Compare(base, new []*Result, opts CompareOptions) (*Report, error) {
	opts.defaults()
	known := Metrics()
	var metrics []Metric
	for _, n := range opts.Metrics {
		m, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("results: unknown metric %q (known: %s)", n, strings.Join(MetricNames(), ", "))
		}
		metrics = append(metrics, m)
	}
	for n := range opts.Thresholds {
		if _, ok := known[n]; !ok {
			return nil, fmt.Errorf("results: threshold for unknown metric %q (known: %s)", n, strings.Join(MetricNames(), ", "))
		}
	}
	for n, a := range opts.Alphas {
		if _, ok := known[n]; !ok {
			return nil, fmt.Errorf("results: alpha for unknown metric %q (known: %s)", n, strings.Join(MetricNames(), ", "))
		}
		if !(a > 0 && a < 1) {
			return nil, fmt.Errorf("results: alpha %v for %s: want 0 < alpha < 1", a, n)
		}
	}
	if len(base) == 0 || len(new) == 0 {
		return nil, fmt.Errorf("results: compare needs results on both sides (base %d, new %d)", len(base), len(new))
	}
	rep := &Report{Alpha: opts.Alpha, Confidence: opts.Confidence}
	bg, ng := GroupResults(base), GroupResults(new)
	type pair struct{ b, n *Group }
	var pairs []pair
	if len(bg) == 1 && len(ng) == 1 {
		pairs = append(pairs, pair{bg[0], ng[0]})
		if bg[0].Key != ng[0].Key {
			rep.Notes = append(rep.Notes, fmt.Sprintf("base %q and new %q differ in configuration (%s); compared anyway",
				bg[0].Label, ng[0].Label, configDiff(bg[0].Results[0], ng[0].Results[0], 4)))
		}
	} else {
		newByKey := map[string]*Group{}
		for _, g := range ng {
			newByKey[g.Key] = g
		}
		used := map[string]bool{}
		for _, b := range bg {
			if n := newByKey[b.Key]; n != nil {
				pairs = append(pairs, pair{b, n})
				used[b.Key] = true
			} else {
				pairs = append(pairs, pair{b, nil})
			}
		}
		for _, n := range ng {
			if !used[n.Key] {
				pairs = append(pairs, pair{nil, n})
			}
		}
	}
	multi := len(pairs) > 1
	needN, needAlpha := 0, opts.Alpha
	ciN := RunsForCI(opts.Confidence)
	infCI := false
	for _, p := range pairs {
		switch {
		case p.n == nil:
			rep.Groups = append(rep.Groups, GroupReport{Label: p.b.Label, BaseRuns: len(p.b.Results), Unmatched: "base"})
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: only in base (%d runs), not compared", p.b.Label, len(p.b.Results)))
			continue
		case p.b == nil:
			rep.Groups = append(rep.Groups, GroupReport{Label: p.n.Label, NewRuns: len(p.n.Results), Unmatched: "new"})
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: only in new (%d runs), not compared", p.n.Label, len(p.n.Results)))
			continue
		}
		gr := GroupReport{Label: p.b.Label, BaseRuns: len(p.b.Results), NewRuns: len(p.n.Results)}
		for _, m := range metrics {
			th := opts.MinChange
			if t, ok := opts.Thresholds[m.Name]; ok {
				th = t
			}
			alpha := opts.Alpha
			if a, ok := opts.Alphas[m.Name]; ok {
				alpha = a
			}
			row := CompareSamples(m, samples(m, p.b.Results), samples(m, p.n.Results), alpha, opts.Confidence, th)
			if row.Base.N == 0 && row.New.N == 0 {
				continue // metric absent on both sides (e.g. no consumer): nothing to say
			}
			if (row.Base.N > 0 && row.Base.N < ciN) || (row.New.N > 0 && row.New.N < ciN) {
				infCI = true
			}
			if row.TooFew {
				if n := RunsNeeded(alpha); n > needN {
					needN, needAlpha = n, alpha
				}
			}
			if row.Regression {
				why := row.Why()
				if multi {
					why = gr.Label + " " + why
				}
				rep.Regressions = append(rep.Regressions, why)
			}
			gr.Rows = append(gr.Rows, row)
		}
		rep.Groups = append(rep.Groups, gr)
	}
	if infCI {
		rep.Notes = append(rep.Notes, fmt.Sprintf("± ∞: a %v%% confidence interval of a median needs >= %d runs per side", opts.Confidence*100, ciN))
	}
	if needN > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("too few runs to call any change significant: need >= %d runs per side for alpha=%v (not failing)", needN, needAlpha))
	}
	return rep, nil
}

// configDiff names up to max config keys whose values differ between base result b and new
// result n ("key=bv->nv"; "unset" where a side has no such key), run identifiers left out.
func configDiff(b, n *Result, max int) string {
	keys := map[string]bool{}
	for k := range b.Config {
		keys[k] = true
	}
	for k := range n.Config {
		keys[k] = true
	}
	var diffs []string
	for k := range keys {
		if ignoredKey(k) {
			continue
		}
		bv, bok := b.Config[k]
		nv, nok := n.Config[k]
		bs, ns := configValue(bv), configValue(nv)
		if !bok {
			bs = "unset"
		}
		if !nok {
			ns = "unset"
		}
		if bs != ns {
			diffs = append(diffs, k+"="+bs+"->"+ns)
		}
	}
	if len(diffs) == 0 {
		return "run identifiers only"
	}
	sort.Strings(diffs)
	if len(diffs) > max {
		return strings.Join(diffs[:max], ", ") + fmt.Sprintf(", and %d more", len(diffs)-max)
	}
	return strings.Join(diffs, ", ")
}

// configValue formats a config value so that a number read back from result.json (float64)
// equals the same number of a result made in process (int, int64, ...).
func configValue(v any) string {
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		return fmt.Sprint(v)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func samples(m Metric, rs []*Result) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := m.Get(r); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

// CompareSamples tests one metric's base and new samples (threshold is a fraction).
func CompareSamples(m Metric, base, new []float64, alpha, confidence, threshold float64) Row {
	row := Row{Metric: m.Name, Unit: m.Unit, HigherBetter: m.HigherBetter, Threshold: threshold, P: 1, Alpha: alpha}
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	side := func(v []float64) (Side, *benchmath.Sample) {
		if len(v) == 0 {
			return Side{}, nil
		}
		s := benchmath.NewSample(append([]float64(nil), v...), th)
		sum := benchmath.AssumeNothing.Summary(s, confidence)
		return Side{N: len(v), Values: s.Values, Center: sum.Center, Lo: sum.Lo, Hi: sum.Hi}, s
	}
	var bs, ns *benchmath.Sample
	row.Base, bs = side(base)
	row.New, ns = side(new)
	switch {
	case bs == nil && ns == nil:
		return row
	case bs == nil:
		row.Note = "no samples in base"
		return row
	case ns == nil:
		row.Note = "no samples in new"
		return row
	}
	switch {
	case row.Base.Center == row.New.Center:
		row.ChangePct = 0
	case row.Base.Center == 0:
		row.ChangePct = math.Inf(1)
		if row.New.Center < 0 {
			row.ChangePct = math.Inf(-1)
		}
	default:
		row.ChangePct = (row.New.Center - row.Base.Center) / math.Abs(row.Base.Center) * 100
	}
	cmp := benchmath.AssumeNothing.Compare(bs, ns)
	row.P = cmp.P
	row.Significant = cmp.P < alpha
	row.TooFew = MinPValue(row.Base.N, row.New.N) >= alpha
	if row.TooFew {
		row.Significant = false
		row.Note = fmt.Sprintf("need >= %d runs per side for alpha=%v", RunsNeeded(alpha), alpha)
	}
	if m.HigherBetter {
		row.Worse = row.ChangePct < 0
	} else {
		row.Worse = row.ChangePct > 0
	}
	row.Regression = row.Worse && row.Significant && !row.TooFew && math.Abs(row.ChangePct) > threshold*100
	return row
}

// MinPValue is the smallest two-sided Mann-Whitney U p-value that samples of sizes n1 and n2
// can give (fully separated samples): 2 / C(n1+n2, n1), at most 1.
func MinPValue(n1, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 {
		return 1
	}
	// C(n1+n2, n1) in floating point (log-gamma avoids overflow).
	lc, _ := math.Lgamma(float64(n1 + n2 + 1))
	l1, _ := math.Lgamma(float64(n1 + 1))
	l2, _ := math.Lgamma(float64(n2 + 1))
	p := 2 / math.Exp(lc-l1-l2)
	return math.Min(p, 1)
}

// RunsForCI is the smallest number of samples for which the distribution-free confidence
// interval of the median (benchmath.AssumeNothing) at confidence is finite; fewer give ± ∞.
func RunsForCI(confidence float64) int {
	th := &benchmath.Thresholds{CompareAlpha: 0.05}
	for n := 1; n < 1000; n++ {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i)
		}
		sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(v, th), confidence)
		if !math.IsInf(sum.Lo, 0) && !math.IsInf(sum.Hi, 0) {
			return n
		}
	}
	return 1000
}

// RunsNeeded is the smallest n such that n runs per side can reach significance at alpha.
func RunsNeeded(alpha float64) int {
	for n := 1; n < 1000; n++ {
		if MinPValue(n, n) < alpha {
			return n
		}
	}
	return 1000
}

func fmtPct(p float64) string {
	switch {
	case math.IsInf(p, 1):
		return "+inf%"
	case math.IsInf(p, -1):
		return "-inf%"
	}
	return fmt.Sprintf("%+.1f%%", p)
}

func fmtThreshold(f float64) string {
	return strconv.FormatFloat(f*100, 'f', -1, 64) + "%"
}

// ParsePercent parses "5%", "5" (both 5%) or "0.05%" into a fraction (0.05). Negative or
// non-numeric values are an error.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a percentage (want e.g. 5%%)", s)
	}
	return v / 100, nil
}

// ParseThreshold parses "metric=pct" (e.g. "p99-ack=20%") for CompareOptions.Thresholds.
func ParseThreshold(s string) (metric string, frac float64, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return "", 0, fmt.Errorf("threshold %q: want metric=percent, e.g. p99-ack=20%%", s)
	}
	k = strings.TrimSpace(k)
	if _, known := Metrics()[k]; !known {
		return "", 0, fmt.Errorf("threshold %q: unknown metric %q (known: %s)", s, k, strings.Join(MetricNames(), ", "))
	}
	f, err := ParsePercent(v)
	if err != nil {
		return "", 0, fmt.Errorf("threshold %q: %v", s, err)
	}
	return k, f, nil
}
