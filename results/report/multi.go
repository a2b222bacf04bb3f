package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/isrbench/isrbench/results"
)

// pointRuns is one point of a sweep or comparison: its label, the varied keys' values and its
// repetitions.
type pointRuns struct {
	label    string
	settings map[string]string
	runs     []*runDir
}

// Build builds the page of dirs: one run directory (or result.json) gives a run page, a sweep
// directory (sweep.json) a sweep page, a gate directory (gate.json, or base/ and new/) the
// gate's comparison; anything else, or several arguments, a comparison of their
// configurations (see BuildComparison).
func Build(dirs []string, o Options) (*Data, error) {
	if len(dirs) == 0 {
		return nil, errors.New("report: no run directories given")
	}
	if len(dirs) == 1 {
		d := dirs[0]
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		switch {
		case !st.IsDir() || fileExists(filepath.Join(d, resultFile)):
			return BuildRun(d, o)
		case fileExists(filepath.Join(d, sweepFile)):
			return BuildSweep(d, o)
		case isGateDir(d):
			return BuildGate(d, o)
		}
	}
	return BuildComparison(dirs, o)
}

// BuildSweep builds the page of a sweep directory: its points and axes from sweep.json, the
// runs from the run directories below it.
func BuildSweep(dir string, o Options) (*Data, error) {
	idx, err := readSweepIndex(dir)
	if err != nil {
		return nil, err
	}
	runs, err := loadRuns(dir)
	if err != nil && !errors.Is(err, results.ErrNoResults) {
		return nil, err
	}
	byDir := map[string]*runDir{}
	for _, r := range runs {
		byDir[filepath.Base(r.dir)] = r
	}
	var pts []pointRuns
	pointOf := map[int]int{}
	var failed []FailedRun
	for _, sr := range idx.Runs {
		label := sr.Label
		if label == "" {
			label = "(spec as is)"
		}
		pi, ok := pointOf[sr.Point]
		if !ok {
			pi = len(pts)
			pointOf[sr.Point] = pi
			pts = append(pts, pointRuns{label: label, settings: sr.Settings})
		}
		r := byDir[filepath.Base(sr.Dir)]
		if sr.Dir != "" && r != nil {
			pts[pi].runs = append(pts[pi].runs, r)
		}
		switch {
		case sr.Error != "":
			failed = append(failed, FailedRun{Label: label, Repeat: sr.Repeat, Error: sr.Error})
		case r == nil:
			failed = append(failed, FailedRun{Label: label, Repeat: sr.Repeat, Error: "no result.json in " + sr.Dir})
		}
	}
	var axes []Axis
	for _, a := range idx.Axes {
		axes = append(axes, Axis{Key: a.Key, Values: append([]string{}, a.Values...)})
	}
	if len(axes) == 0 {
		axes = setAxis(pts)
	}
	title := o.Title
	if title == "" {
		title = fmt.Sprintf("isrbench sweep %s: %s", idx.Name, filepath.Base(dir))
	}
	d, err := multiData("sweep", title, pts, axes, results.DefaultMetrics, o, filepath.Dir(o.out(dir)))
	if err != nil {
		return nil, err
	}
	d.Multi.Failed = failed
	return d, nil
}

// BuildComparison builds a comparison of the configurations in dirs (run, sweep or gate
// directories, or any directory holding result.json files): each argument's results are
// grouped into configurations (results.GroupResults), each configuration a point, labelled
// with the argument when there are several. The keys varied between the points are the axes;
// points of one configuration share the axis "set".
func BuildComparison(dirs []string, o Options) (*Data, error) {
	if len(dirs) == 0 {
		return nil, errors.New("report: no run directories given")
	}
	if len(dirs) > 1 && o.Out == "" {
		return nil, errors.New("report: a comparison of several directories needs an output path")
	}
	var pts []pointRuns
	for _, d := range dirs {
		var runs []*runDir
		if st, err := os.Stat(d); err == nil && !st.IsDir() {
			r, err := loadRun(d)
			if err != nil {
				return nil, err
			}
			runs = []*runDir{r}
		} else {
			var err error
			if runs, err = loadRuns(d); err != nil {
				return nil, err
			}
		}
		byRes := map[*results.Result]*runDir{}
		rs := make([]*results.Result, len(runs))
		for i, r := range runs {
			rs[i], byRes[r.res] = r.res, r
		}
		groups := results.GroupResults(rs)
		for _, g := range groups {
			p := pointRuns{label: g.Label}
			if len(dirs) > 1 {
				p.label = d
				if len(groups) > 1 {
					p.label += ": " + g.Label
				}
			}
			for _, r := range g.Results {
				p.runs = append(p.runs, byRes[r])
			}
			pts = append(pts, p)
		}
	}
	axes := variedAxes(pts)
	title := o.Title
	if title == "" {
		title = "isrbench comparison of " + strings.Join(dirs, ", ")
	}
	return multiData("comparison", title, pts, axes, results.DefaultMetrics, o, filepath.Dir(o.out(dirs[0])))
}

// variedAxes are the config keys that differ between the points (each point's first run),
// with the points' settings; the single axis "set" when none differ or when two points have
// the same values of them.
func variedAxes(pts []pointRuns) []Axis {
	reps := make([]*results.Result, len(pts))
	for i, p := range pts {
		reps[i] = p.runs[0].res
	}
	keys := results.VariedKeys(reps)
	if len(keys) == 0 || len(pts) < 2 {
		return setAxis(pts)
	}
	axes := make([]Axis, len(keys))
	seen := map[string]bool{}
	for i := range pts {
		pts[i].settings = map[string]string{}
		var tuple []string
		for j, k := range keys {
			v := fmtAny(pts[i].runs[0].config[k])
			pts[i].settings[k] = v
			tuple = append(tuple, v)
			if !contains(axes[j].Values, v) {
				axes[j].Key = k
				axes[j].Values = append(axes[j].Values, v)
			}
		}
		t := strings.Join(tuple, "\x00")
		if seen[t] {
			for i := range pts {
				pts[i].settings = nil
			}
			return setAxis(pts)
		}
		seen[t] = true
	}
	for j, k := range keys {
		axes[j].Key = k
	}
	return axes
}

func setAxis(pts []pointRuns) []Axis {
	a := Axis{Key: "set", Values: []string{}}
	for _, p := range pts {
		a.Values = append(a.Values, p.label)
	}
	return []Axis{a}
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}

// multiData builds the page of points: stats, merged distributions, metric charts.
func multiData(kind, title string, pts []pointRuns, axes []Axis, metrics []string, o Options, pageDir string) (*Data, error) {
	known := results.Metrics()
	m := &MultiData{Axes: axes, Metrics: []MetricInfo{}, Points: []Point{}}
	for _, name := range metrics {
		mt, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("report: unknown metric %q (known: %s)", name, strings.Join(results.MetricNames(), ", "))
		}
		m.Metrics = append(m.Metrics, MetricInfo{Name: mt.Name, Unit: mt.Unit, HigherBetter: mt.HigherBetter})
	}
	pseudo := len(axes) == 1 && (axes[0].Key == "set" || axes[0].Key == "side")
	merged := make([][]*results.Histogram, len(pts))
	for i, p := range pts {
		pt := Point{Label: p.label, Settings: map[string]string{}, Runs: []RunRef{}, Stats: map[string]Stat{}, Hist: map[string]int{}}
		for k, v := range p.settings {
			pt.Settings[k] = v
		}
		if pseudo {
			pt.Settings[axes[0].Key] = p.label
		}
		for _, r := range p.runs {
			ref := RunRef{ID: r.res.ID, Result: href(pageDir, filepath.Join(r.dir, resultFile))}
			if rp := filepath.Join(r.dir, FileName); fileExists(rp) {
				ref.Report = href(pageDir, rp)
			}
			pt.Runs = append(pt.Runs, ref)
		}
		for _, mi := range m.Metrics {
			var vals []float64
			for _, r := range p.runs {
				if v, ok := known[mi.Name].Get(r.res); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
					vals = append(vals, v)
				}
			}
			if len(vals) > 0 {
				pt.Stats[mi.Name] = stat(vals)
			}
		}
		merged[i] = make([]*results.Histogram, len(hists))
		for hi, h := range hists {
			acc := results.NewHistogram()
			n := 0
			for _, r := range p.runs {
				s := h.get(r.res)
				if s.Count == 0 || s.Hdr == "" {
					continue
				}
				hh, err := results.DecodeSummaryHdr(*s)
				if err != nil {
					continue
				}
				acc.Merge(hh)
				n++
			}
			if n > 0 || !h.optional {
				pt.Hist[h.Metric] = n
			}
			merged[i][hi] = acc
		}
		m.Points = append(m.Points, pt)
	}
	// A metric no run has (the cost metrics of result.json files written before cost was
	// measured) gets no column.
	kept := m.Metrics[:0]
	for _, mi := range m.Metrics {
		for _, pt := range m.Points {
			if _, ok := pt.Stats[mi.Name]; ok {
				kept = append(kept, mi)
				break
			}
		}
	}
	m.Metrics = kept
	m.Config = multiConfig(pts, o.Defaults)
	m.Cost = multiCost(pts)

	var charts []Chart
	for _, a := range axes {
		charts = append(charts, metricCharts(a, axes, m, pseudo)...)
	}
	for hi, h := range hists {
		var series []Series
		var missing []string
		for i, p := range pts {
			s := percentileSeries(p.label, i, merged[i][hi])
			if len(s.X) > 0 {
				series = append(series, s)
			}
			if withData := countWith(p.runs, hi); withData > m.Points[i].Hist[h.Metric] {
				missing = append(missing, fmt.Sprintf("%s (%d of %d runs)", p.label, withData-m.Points[i].Hist[h.Metric], withData))
			}
		}
		if len(series) == 0 {
			continue
		}
		c := percentileChart("dist-"+h.Metric, "distributions", h.Name+": percentile distribution per point (repetitions merged)", series)
		if len(missing) > 0 {
			c.Note = "without a histogram encoding, left out: " + strings.Join(missing, ", ")
		}
		charts = append(charts, c)
	}
	return &Data{Schema: DataSchema, Kind: kind, Title: title, Multi: m, Charts: charts}, nil
}

// countWith counts the runs with values in histogram hi.
func countWith(runs []*runDir, hi int) int {
	n := 0
	for _, r := range runs {
		if hists[hi].get(r.res).Count > 0 {
			n++
		}
	}
	return n
}

func stat(vals []float64) Stat {
	v := append([]float64(nil), vals...)
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{N: len(v), Median: med, Min: v[0], Max: v[len(v)-1], Values: v}
}

// metricCharts are axis a against every metric: a "points" chart per metric, x = a's values,
// one series per combination of the other axes' values.
func metricCharts(a Axis, axes []Axis, m *MultiData, pseudo bool) []Chart {
	var out []Chart
	for _, mi := range m.Metrics {
		var series []Series
		index := map[string]int{}
		for _, p := range m.Points {
			st, ok := m.Stats(p, mi.Name)
			if !ok {
				continue
			}
			x := indexOf(a.Values, p.Settings[a.Key])
			if x < 0 {
				continue
			}
			var other []string
			for _, b := range axes {
				if b.Key != a.Key {
					other = append(other, b.Key+"="+p.Settings[b.Key])
				}
			}
			name := strings.Join(other, ", ")
			if name == "" {
				name = mi.Name
			}
			si, ok := index[name]
			if !ok {
				si = len(series)
				index[name] = si
				series = append(series, Series{Name: name, Style: si, X: []float64{}, Y: []float64{}, Lo: []float64{}, Hi: []float64{}, N: []int{}})
			}
			s := &series[si]
			s.X = append(s.X, float64(x))
			s.Y = append(s.Y, st.Median)
			s.Lo = append(s.Lo, st.Min)
			s.Hi = append(s.Hi, st.Max)
			s.N = append(s.N, st.N)
		}
		if len(series) == 0 {
			continue
		}
		y := ChartAx{Label: mi.Name, Scale: "linear", Unit: mi.Unit, Min: ptr(0.0)}
		if mi.Unit == "µs" {
			y.Scale, y.Min = "log", nil
		}
		xl := a.Key
		if pseudo {
			xl = map[string]string{"side": "gate side", "set": "run set"}[a.Key]
		}
		title := mi.Name + " by " + xl
		out = append(out, Chart{ID: "metric-" + slug(a.Key) + "-" + slug(mi.Name), Section: "metrics", Title: title, Kind: "points",
			X: ChartAx{Label: xl, Scale: "category", Categories: a.Values}, Y: y, Series: series,
			Note: "marker: median over the repetitions; bar: lowest to highest"})
	}
	return out
}

// Stats returns point p's stat of metric name.
func (m *MultiData) Stats(p Point, name string) (Stat, bool) {
	s, ok := p.Stats[name]
	return s, ok
}

func indexOf(v []string, s string) int {
	for i, x := range v {
		if x == s {
			return i
		}
	}
	return -1
}

func slug(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// multiConfig is the configuration of all the points' runs: a key with one value in all of
// them shows it, a key whose values differ (or that some lack) is marked varied.
func multiConfig(pts []pointRuns, defaults map[string]Default) []ConfigRow {
	common := map[string]any{}
	varied := map[string]bool{}
	first := true
	for _, p := range pts {
		for _, r := range p.runs {
			if first {
				for k, v := range r.config {
					common[k] = v
				}
				first = false
				continue
			}
			for k, v := range common {
				if w, ok := r.config[k]; !ok || fmtAny(w) != fmtAny(v) {
					delete(common, k)
					varied[k] = true
				}
			}
			for k := range r.config {
				if _, ok := common[k]; !ok {
					varied[k] = true
				}
			}
		}
	}
	for k := range varied {
		if ignoredKey(k) {
			delete(varied, k)
		}
	}
	return configRows(common, varied, defaults)
}

// ignoredKey: run identifiers, not settings (results.IgnoredConfigKeys).
func ignoredKey(k string) bool {
	last := k
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		last = k[i+1:]
	}
	for _, ig := range results.IgnoredConfigKeys {
		if k == ig || last == ig {
			return true
		}
	}
	return false
}

// multiCost is each cost number's median per point.
func multiCost(pts []pointRuns) []CostRow {
	perPoint := make([]map[string][]float64, len(pts))
	keys := map[string]bool{}
	for i, p := range pts {
		perPoint[i] = map[string][]float64{}
		for _, r := range p.runs {
			c, err := decodeCost(r.cost)
			if err != nil || c == nil {
				continue
			}
			for _, kv := range c.Numbers {
				perPoint[i][kv.Key] = append(perPoint[i][kv.Key], kv.Value)
				keys[kv.Key] = true
			}
		}
	}
	var out []CostRow
	for _, k := range sortedKeys(keys) {
		row := CostRow{Key: k}
		for i := range pts {
			if v := perPoint[i][k]; len(v) > 0 {
				row.Values = append(row.Values, ptr(stat(v).Median))
			} else {
				row.Values = append(row.Values, nil)
			}
		}
		out = append(out, row)
	}
	return out
}
