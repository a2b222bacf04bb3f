package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
)

// Options configure a report. The zero value is usable: no defaults known, links relative to
// <dir>/report.html.
type Options struct {
	// Defaults are the settings' defaults by config key (the runner passes the workload
	// spec's; a key "producers.X" also serves "producers[N].X"). Keys without one are shown
	// without a default.
	Defaults map[string]Default
	// Title replaces the page's default title.
	Title string
	// Out is the page's path, which links are made relative to; default <dir>/report.html
	// (for several directories Build needs it).
	Out string
}

// Default is one setting's default. Value is what the workload spec uses when the setting is
// not given; Kafka is Kafka's own default where isrbench's differs from it (nil otherwise).
// Values are JSON scalars or Go numbers, bools and strings.
type Default struct {
	Value any
	Kafka any
}

func (o Options) out(dir string) string {
	if o.Out != "" {
		return o.Out
	}
	return filepath.Join(dir, FileName)
}

// BuildRun builds the page of one run directory (or its result.json).
func BuildRun(path string, o Options) (*Data, error) {
	r, err := loadRun(path)
	if err != nil {
		return nil, err
	}
	rd, charts, err := runData(r, o, filepath.Dir(o.out(r.dir)))
	if err != nil {
		return nil, err
	}
	title := o.Title
	if title == "" {
		title = fmt.Sprintf("isrbench run %s: %s", r.res.Name, r.res.ID)
	}
	return &Data{Schema: DataSchema, Kind: "run", Title: title, Run: rd, Charts: charts}, nil
}

// runData reads everything of one run.
func runData(r *runDir, o Options, pageDir string) (*RunData, []Chart, error) {
	res := r.res
	rd := &RunData{ID: res.ID, Name: res.Name, Target: res.Target, DurationS: res.DurationS, Env: res.Env,
		Durability: res.Durability, Faults: []FaultRow{}, Files: []FileLink{}}
	if !res.StartedAt.IsZero() {
		rd.StartedAt = res.StartedAt.UTC().Format(time.RFC3339)
	}
	rd.Produced = Produced{Records: res.Produced.Records, Bytes: res.Produced.Bytes,
		RecordsPerSec: round(res.Produced.RecordsPerSec, 3), MBPerSec: round(res.Produced.MBPerSec, 6), Errors: []KV{}}
	for _, k := range sortedKeys(res.Produced.Errors) {
		rd.Produced.Errors = append(rd.Produced.Errors, KV{Key: k, Value: strconv.FormatInt(res.Produced.Errors[k], 10)})
	}
	for _, h := range hists {
		s := h.get(res)
		if h.optional && s.Count == 0 {
			continue
		}
		rd.Latency = append(rd.Latency, LatencyRow{Name: h.Name, Field: h.Field, Count: s.Count, Mean: s.Mean,
			P50: s.P50, P90: s.P90, P99: s.P99, P999: s.P999, P9999: s.P9999, Max: s.Max})
	}
	if res.Probe != nil {
		rd.Queueing = res.Probe.Queueing
	}
	for _, k := range sortedKeys(res.Notes) {
		rd.Notes = append(rd.Notes, KV{Key: k, Value: res.Notes[k]})
	}
	rd.Config = configRows(r.config, nil, o.Defaults)
	cost, err := decodeCost(r.cost)
	if err != nil {
		return nil, nil, fmt.Errorf("report: %s: cost: %w", filepath.Join(r.dir, resultFile), err)
	}
	rd.Cost = cost

	fr, faultsPath, err := r.readFaults()
	if err != nil {
		return nil, nil, err
	}
	for i, f := range res.Faults {
		row := FaultRow{Kind: f.Kind, Target: f.Target, AtS: round(f.AtS, 3), EndS: round(f.EndS, 3), Detail: f.Detail, Error: f.Error}
		if fr != nil && i < len(fr.Faults) && fr.Faults[i].Kind == f.Kind {
			ff := fr.Faults[i]
			row.TimeToShrinkS, row.TimeToRejoinS, row.FailedProduces = ptr(ff.TimeToShrinkS), ptr(ff.TimeToRejoinS), ptr(ff.FailedProduces)
		}
		rd.Faults = append(rd.Faults, row)
	}
	rd.ISR = ISRData{Shrinks: res.ISR.Shrinks, Expands: res.ISR.Expands, UnderReplicatedS: round(res.ISR.UnderReplicatedS, 3), Events: []ISREvent{}}
	partName := ""
	if fr != nil {
		rd.ISR.EventsTotal = len(fr.ISREvents)
		for i, e := range fr.ISREvents {
			if i == MaxISREvents {
				break
			}
			e.T = round(e.T, 3)
			rd.ISR.Events = append(rd.ISR.Events, e)
		}
		rd.ISR.LeaderlessPartitionS = fr.LeaderlessPartitionS
		rd.ISR.Source = faultsFile
		rd.ReplicaLogs = fr.ReplicaLogs
		partName = fr.PartitionsCSV
	}

	var charts []Chart
	lat, note := latencySeries(r)
	if len(lat) > 0 {
		c := percentileChart("latency", "latency", "Latency percentile distributions", lat)
		c.Note = note
		charts = append(charts, c)
	}
	rows, tlPath, err := r.readTimeline()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) > 0 {
		k := bucketSize(len(rows), MaxTimelinePoints)
		rd.Timeline = TimelineInfo{File: filepath.Base(tlPath), IntervalS: interval(rows), Rows: len(rows), Bucket: k}
		charts = append(charts, timelineCharts(rows, k, res.DurationS, rd.Faults, rd.ISR.Events)...)
	}
	capped := ""
	if rd.ISR.EventsTotal > len(rd.ISR.Events) {
		capped = fmt.Sprintf("ISR events marked: the first %d of %d (all in %s)", len(rd.ISR.Events), rd.ISR.EventsTotal, faultsFile)
	}
	prows, partPath, err := r.readPartitions(partName)
	if err != nil {
		return nil, nil, err
	}
	if c, bucket, note, ok := partitionChart(prows, res.DurationS, rd.Faults, rd.ISR.Events); ok {
		rd.Timeline.PartitionsRows = len(prows)
		rd.Timeline.PartitionBucket = bucket
		charts = append(charts, c)
	} else if len(prows) > 0 {
		rd.Timeline.PartitionsRows = len(prows)
		rd.Timeline.PartitionsNote = note
	}
	for i := range charts {
		if capped != "" && (charts[i].ID == "timeline-isr" || charts[i].ID == "timeline-partitions") {
			charts[i].Note = strings.TrimPrefix(charts[i].Note+"; "+capped, "; ")
		}
	}

	link := func(kind, p string) {
		if p == "" {
			return
		}
		rd.Files = append(rd.Files, FileLink{Kind: kind, Name: filepath.Base(p), Href: href(pageDir, p)})
	}
	link("result", filepath.Join(r.dir, resultFile))
	for _, p := range res.Files.Hgrm {
		link("histogram", r.resolve(p))
	}
	link("timeline", tlPath)
	link("partitions", partPath)
	link("faults", faultsPath)
	link("bench", r.resolve(res.Files.Bench))
	for _, p := range res.Files.Plots {
		link("plot", r.resolve(p))
	}
	for _, p := range res.Files.Profiles {
		if q := r.resolve(p); q != "" {
			rd.Files = append(rd.Files, FileLink{Kind: "profile", Name: relName(r.dir, q), Href: href(pageDir, q)})
		}
	}
	return rd, charts, nil
}

// relName is p relative to dir when inside it, else its base name.
func relName(dir, p string) string {
	if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return filepath.Base(p)
}

// latencySeries are the run's four distributions: from the hdr encodings, else the .hgrm
// files, else the summary percentiles; note says where a fallback was used.
func latencySeries(r *runDir) ([]Series, string) {
	var out []Series
	var notes []string
	for i, h := range hists {
		sum := h.get(r.res)
		if sum.Count == 0 {
			continue
		}
		if sum.Hdr != "" {
			hh, err := results.DecodeSummaryHdr(*sum)
			if err == nil {
				out = append(out, percentileSeries(h.Name, i, hh))
				continue
			}
			notes = append(notes, fmt.Sprintf("%s: %s.hdr unreadable (%v)", h.Name, h.Field, err))
		}
		if g := r.hgrm(h.Field); g != nil && len(g.Rows) > 0 {
			out = append(out, hgrmSeries(h.Name, i, g))
			notes = append(notes, h.Name+": drawn from its .hgrm file (result.json has no histogram encoding)")
			continue
		}
		out = append(out, summarySeries(h.Name, i, *sum))
		notes = append(notes, h.Name+": only the summary percentiles (no histogram encoding or .hgrm file)")
	}
	return out, strings.Join(notes, "; ")
}

// hgrmNames are the runner's .hgrm file names by result.json field.
var hgrmNames = map[string]string{"ack_latency_us": "ack_latency.hgrm", "hw_lag_us": "hw_lag.hgrm",
	"e2e_latency_us": "e2e_latency.hgrm", "send_delay_us": "send_delay.hgrm",
	"commit_latency_us": "commit_latency.hgrm", "lso_lag_us": "lso_lag.hgrm", "e2e_read_committed_us": "e2e_read_committed.hgrm"}

func (r *runDir) hgrm(field string) *results.Hgrm {
	name := hgrmNames[field]
	p := ""
	for _, f := range r.res.Files.Hgrm {
		if filepath.Base(f) == name {
			p = r.resolve(f)
		}
	}
	if p == "" {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	g, err := results.ParseHgrm(f)
	if err != nil {
		return nil
	}
	return g
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// configRows lists cfg sorted by key with each value's default; varied keys (of a sweep or
// comparison) show "varied".
func configRows(cfg map[string]any, varied map[string]bool, defaults map[string]Default) []ConfigRow {
	rows := []ConfigRow{}
	keys := sortedKeys(cfg)
	for k := range varied {
		if _, ok := cfg[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		row := ConfigRow{Key: k, Value: fmtAny(cfg[k])}
		if d, ok := lookupDefault(defaults, k); ok {
			row.Default = fmtAny(d.Value)
			if d.Kafka != nil {
				row.Kafka = fmtAny(d.Kafka)
			}
		}
		if varied[k] {
			row.Varied, row.Value = true, "varied"
		} else {
			row.Differs = row.Default != "" && !sameValue(row.Value, row.Default)
			ref := row.Default
			if row.Kafka != "" {
				ref = row.Kafka
			}
			row.DiffersKafka = ref != "" && !sameValue(row.Value, ref)
		}
		rows = append(rows, row)
	}
	return rows
}

// lookupDefault finds key's default; "producers[N].X" (a further producer group) takes
// "producers.X"'s.
func lookupDefault(defaults map[string]Default, key string) (Default, bool) {
	if d, ok := defaults[key]; ok {
		return d, true
	}
	if rest, ok := strings.CutPrefix(key, "producers["); ok {
		if _, after, ok := strings.Cut(rest, "]."); ok {
			d, ok := defaults["producers."+after]
			return d, ok
		}
	}
	return Default{}, false
}

// fmtAny renders a config value or default: numbers as result.json writes them.
func fmtAny(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return fmtNum(x)
	case float32:
		return fmtNum(float64(x))
	case bool:
		return strconv.FormatBool(x)
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// sameValue compares two rendered values: equal text, or equal numbers.
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	fa, err1 := strconv.ParseFloat(a, 64)
	fb, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && fa == fb
}

// decodeCost reads result.json's "cost" object generically: nil when absent or null.
func decodeCost(raw json.RawMessage) (*Cost, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	c := &Cost{Numbers: []KVNum{}}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e)
			}
		case json.Number:
			if f, err := x.Float64(); err == nil {
				c.Numbers = append(c.Numbers, KVNum{Key: prefix, Value: f})
			} else {
				c.Texts = append(c.Texts, KV{Key: prefix, Value: x.String()})
			}
		case nil:
		default:
			c.Texts = append(c.Texts, KV{Key: prefix, Value: fmtAny(x)})
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", raw)
	}
	walk("", v)
	return c, nil
}
