package report

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/results"
)

//go:embed assets/report.js assets/report.css assets/page.html.tmpl
var assets embed.FS

var page = template.Must(template.New("page.html.tmpl").Funcs(funcs).ParseFS(assets, "assets/page.html.tmpl"))

var funcs = template.FuncMap{
	"num":   fmtShort,
	"us":    fmtUs,
	"int":   fmtInt,
	"ids":   ids,
	"join":  strings.Join,
	"slug":  slug,
	"short": func(s string) string { return s[:min(12, len(s))] },
	"deref": func(p *float64) float64 { return *p },
	"secs": func(p *float64) string {
		switch {
		case p == nil:
			return ""
		case *p < 0:
			return "never"
		}
		return fmtShort(*p) + " s"
	},
	"pct100": func(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + "%" },
	"change": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprintf("%+.1f%%", *p)
	},
	"val": fmtUnit,
	// breakable lets "key=v,key=v" labels wrap after each comma.
	"breakable": func(s string) template.HTML {
		return template.HTML(strings.ReplaceAll(template.HTMLEscapeString(s), ",", ",<wbr>"))
	},
	"side": func(s SideStat, unit string) string {
		if s.N == 0 || s.Median == nil {
			return "no samples"
		}
		ci := "± ∞"
		if s.Lo != nil && s.Hi != nil {
			ci = fmtUnit(*s.Lo, unit) + " … " + fmtUnit(*s.Hi, unit)
		}
		return fmt.Sprintf("%s (%s, n=%d)", fmtUnit(*s.Median, unit), ci, s.N)
	},
	"verdictText": func(v string) string {
		switch v {
		case "regression":
			return "✗ regression"
		case "improvement":
			return "✓ improvement"
		}
		return v
	},
	"stat": func(p Point, name string) *Stat {
		if s, ok := p.Stats[name]; ok {
			return &s
		}
		return nil
	},
	"runs": func(m *MultiData) int {
		n := 0
		for _, p := range m.Points {
			n += len(p.Runs)
		}
		return n
	},
	"changed": func(rows []ConfigRow) []ConfigRow {
		var out []ConfigRow
		for _, r := range rows {
			if r.Differs {
				out = append(out, r)
			}
		}
		return out
	},
	"hasProfiles": func(fs []FileLink) bool {
		for _, f := range fs {
			if f.Kind == "profile" {
				return true
			}
		}
		return false
	},
	"charts": func(d *Data, section string) []Chart {
		var out []Chart
		for _, c := range d.Charts {
			if c.Section == section {
				out = append(out, c)
			}
		}
		return out
	},
}

// fmtShort is a number with 4 significant digits and k/M/G beyond 10000 (results.FormatValue),
// without trailing zeros: 9, 2.048, 52.13k.
func fmtShort(v float64) string {
	s := results.FormatValue(v)
	num, suffix := s, ""
	if n := len(s); n > 0 && strings.ContainsRune("kMG", rune(s[n-1])) {
		num, suffix = s[:n-1], s[n-1:]
	}
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + suffix
}

// fmtUs is a µs value in the unit that suits it, number and unit kept together by a
// no-break space: 272 µs, 4.743 ms, 5.005 s.
func fmtUs(v float64) string {
	a := math.Abs(v)
	switch {
	case a < 1000:
		return strconv.FormatFloat(v, 'f', -1, 64) + "\u00a0µs"
	case a < 1e6:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "\u00a0ms"
	}
	return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "\u00a0s"
}

// fmtUnit formats a metric value: µs values as durations, others as numbers (the metric's
// name says the unit: records/s, MB/s).
func fmtUnit(v float64, unit string) string {
	if unit == "µs" {
		return fmtUs(v)
	}
	return fmtShort(v)
}

// fmtInt groups digits by thousands: 18,432,000.
func fmtInt(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

type navItem struct{ ID, Title string }

// Render renders d as a self-contained HTML page.
func Render(d *Data) ([]byte, error) {
	js, err := assets.ReadFile("assets/report.js")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	// encoding/json escapes <, > and & (and U+2028/9): the block cannot end the script early.
	data, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("report: encode data: %w", err)
	}
	var nav []navItem
	if d.Run != nil {
		nav = []navItem{{"summary", "Summary"}, {"latency", "Latency"}, {"timeline", "Timeline"}, {"isr", "ISR events"},
			{"faults", "Faults"}, {"durability", "Durability"}, {"cost", "Cost"}, {"config", "Configuration"}, {"files", "Files"}}
	} else {
		nav = []navItem{{"overview", "Points"}}
		if d.Multi != nil && d.Multi.Gate != nil {
			nav = append(nav, navItem{"gate", "Gate verdict"})
		}
		nav = append(nav, navItem{"metrics", "Metrics"}, navItem{"distributions", "Distributions"}, navItem{"cost", "Cost"},
			navItem{"runs", "Runs"}, navItem{"config", "Configuration"})
	}
	var buf bytes.Buffer
	err = page.Execute(&buf, struct {
		D   *Data
		Nav []navItem
		// Trusted: our own embedded assets and encoding/json output.
		JSON template.JS
		JS   template.JS
		CSS  template.CSS
	}{d, nav, template.JS(data), template.JS(js), template.CSS(css)})
	if err != nil {
		return nil, fmt.Errorf("report: render: %w", err)
	}
	return buf.Bytes(), nil
}

// Write renders d into path atomically (temp file + rename), mode 0644.
func Write(path string, d *Data) error {
	b, err := Render(d)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	return nil
}

// WriteRun builds the page of the run directory dir and writes it to <dir>/report.html (or
// o.Out); it returns the page's path.
func WriteRun(dir string, o Options) (string, error) {
	d, err := BuildRun(dir, o)
	if err != nil {
		return "", err
	}
	out := o.out(dir)
	return out, Write(out, d)
}

// WriteSweep builds the page of the sweep directory dir and writes it to <dir>/report.html (or
// o.Out); it returns the page's path.
func WriteSweep(dir string, o Options) (string, error) {
	d, err := BuildSweep(dir, o)
	if err != nil {
		return "", err
	}
	out := o.out(dir)
	return out, Write(out, d)
}

// ExtractData returns the data block of a rendered page (what a golden test compares).
func ExtractData(page []byte) ([]byte, error) {
	const open = `<script type="application/json" id="isrbench-data">`
	i := bytes.Index(page, []byte(open))
	if i < 0 {
		return nil, fmt.Errorf("report: page has no %s block", open)
	}
	rest := page[i+len(open):]
	j := bytes.Index(rest, []byte("</script>"))
	if j < 0 {
		return nil, fmt.Errorf("report: data block is not closed")
	}
	return rest[:j], nil
}

// DefaultOut is the page path for one argument of Build: <dir>/report.html, or next to a
// result.json file.
func DefaultOut(path string) string {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return filepath.Join(filepath.Dir(path), FileName)
	}
	return filepath.Join(path, FileName)
}
