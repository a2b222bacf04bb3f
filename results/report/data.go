package report

import (
	"math"
	"strconv"

	"github.com/isrbench/isrbench/results"
)

// DataSchema is the version of the data section (Data.Schema).
const DataSchema = 1

// Data is the data section of a report page: everything the page shows, as JSON. The tables of
// the page are rendered from it and its charts are drawn from Charts. A plain value.
type Data struct {
	Schema int    `json:"schema"` // DataSchema
	Kind   string `json:"kind"`   // "run", "sweep" or "comparison"
	Title  string `json:"title"`
	// Run is the run of a "run" page.
	Run *RunData `json:"run,omitempty"`
	// Multi holds the points of a "sweep" or "comparison" page.
	Multi  *MultiData `json:"multi,omitempty"`
	Charts []Chart    `json:"charts"`
}

// RunData is one run.
type RunData struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Target    string      `json:"target"`
	StartedAt string      `json:"started_at"`
	DurationS float64     `json:"duration_s"`
	Env       results.Env `json:"env"`
	Produced  Produced    `json:"produced"`
	// Latency is the summary table: one row per histogram (ack, hw lag, e2e, send delay).
	Latency []LatencyRow `json:"latency"`
	// Queueing is the load's ack p50 and p99 over the one-at-a-time probe's p50 (result.json
	// probe.queueing); nil without a probe.
	Queueing   *results.Queueing  `json:"queueing,omitempty"`
	ISR        ISRData            `json:"isr"`
	Faults     []FaultRow         `json:"faults"`
	Durability results.Durability `json:"durability"`
	// ReplicaLogs is faults.json's replica-log verdict, when the run has one.
	ReplicaLogs *ReplicaLogs `json:"replica_logs,omitempty"`
	Cost        *Cost        `json:"cost"` // nil when result.json has no "cost" object
	Config      []ConfigRow  `json:"config"`
	Notes       []KV         `json:"notes,omitempty"`
	Files       []FileLink   `json:"files"`
	Timeline    TimelineInfo `json:"timeline"`
}

// Produced is the produced line of the summary.
type Produced struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Errors        []KV    `json:"errors"` // Kafka error name -> failed records, sorted by name
}

// LatencyRow is one histogram of the summary table, values in µs.
type LatencyRow struct {
	Name  string  `json:"name"` // "ack", "hw lag", "e2e", "send delay"
	Field string  `json:"field"`
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	P9999 float64 `json:"p9999"`
	Max   float64 `json:"max"`
}

// ISRData are the ISR figures and events of a run.
type ISRData struct {
	Shrinks          int64   `json:"shrinks"`
	Expands          int64   `json:"expands"`
	UnderReplicatedS float64 `json:"under_replicated_s"`
	// Events are the shrink/expand events of faults.json (100 ms samples of partitions.csv),
	// at most MaxISREvents; EventsTotal counts all of them.
	Events               []ISREvent `json:"events"`
	EventsTotal          int        `json:"events_total"`
	LeaderlessPartitionS float64    `json:"leaderless_partition_s"`
	Source               string     `json:"source"` // where the events come from, "" when the run has none
}

// ISREvent is one ISR change of a partition.
type ISREvent struct {
	T         float64 `json:"t_s"`
	Partition int32   `json:"partition"`
	Kind      string  `json:"kind"` // "shrink", "expand", "change"
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// FaultRow is one applied fault, with the timeline figures of faults.json when present.
type FaultRow struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target,omitempty"`
	AtS    float64 `json:"at_s"`
	EndS   float64 `json:"end_s"` // 0 = instantaneous or never healed
	Detail string  `json:"detail,omitempty"`
	Error  string  `json:"error,omitempty"`
	// TimeToShrinkS and TimeToRejoinS are faults.json's figures (-1 = none/never); nil when absent.
	TimeToShrinkS  *float64 `json:"time_to_shrink_s,omitempty"`
	TimeToRejoinS  *float64 `json:"time_to_rejoin_s,omitempty"`
	FailedProduces *int64   `json:"failed_produces,omitempty"`
}

// ReplicaLogs is the replica-log check of faults.json.
type ReplicaLogs struct {
	Checked   int    `json:"checked"`
	Lost      int64  `json:"lost"`
	Identical bool   `json:"identical"`
	Note      string `json:"note,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Cost is result.json's "cost" object as generic pairs: Numbers are its numeric leaves (nested
// objects flattened with dots), Texts its other scalar leaves.
type Cost struct {
	Numbers []KVNum `json:"numbers"`
	Texts   []KV    `json:"texts,omitempty"`
}

// KV is a key and a text value.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// KVNum is a key and a number.
type KVNum struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// ConfigRow is one effective setting.
type ConfigRow struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Default is the setting's default ("" when it has none, e.g. target); Kafka is Kafka's own
	// default where it differs from isrbench's.
	Default string `json:"default,omitempty"`
	Kafka   string `json:"kafka_default,omitempty"`
	// Differs: Value is not Default. DiffersKafka: Value is not Kafka's default.
	Differs      bool `json:"differs"`
	DiffersKafka bool `json:"differs_kafka"`
	// Varied: the key takes different values across the points of a sweep or comparison
	// (Value is then "varied").
	Varied bool `json:"varied,omitempty"`
}

// FileLink links a file of a run, relative to the page.
type FileLink struct {
	Kind string `json:"kind"` // "result", "histogram", "timeline", "partitions", "faults", "bench", "plot", "profile"
	Name string `json:"name"`
	Href string `json:"href"`
}

// TimelineInfo describes the timeline charts of a run.
type TimelineInfo struct {
	File      string  `json:"file,omitempty"` // "" when the run has no timeline
	IntervalS float64 `json:"interval_s"`     // the timeline's own period
	Rows      int     `json:"rows"`
	// Bucket is how many intervals each plotted point covers (1 = full resolution).
	Bucket         int `json:"bucket"`
	PartitionsRows int `json:"partitions_rows"`
	// PartitionBucket is the same for the per-partition ISR chart (0 = no such chart).
	PartitionBucket int `json:"partition_bucket"`
	// PartitionsNote says why there is no per-partition chart although partitions.csv exists.
	PartitionsNote string `json:"partitions_note,omitempty"`
}

// MultiData are the points of a sweep or comparison.
type MultiData struct {
	// Axes are the keys varied between the points, each with its values in point order; a
	// comparison whose points share one configuration has the single axis "set".
	Axes    []Axis       `json:"axes"`
	Metrics []MetricInfo `json:"metrics"`
	Points  []Point      `json:"points"`
	Gate    *Verdict     `json:"gate,omitempty"`
	// Failed lists sweep runs that failed (sweep.json), with their error.
	Failed []FailedRun `json:"failed,omitempty"`
	// Config is the configuration the points share, with the varied keys marked.
	Config []ConfigRow `json:"config"`
	Cost   []CostRow   `json:"cost,omitempty"`
}

// Axis is one varied key and its values.
type Axis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// MetricInfo names one metric of the points (see results.Metrics).
type MetricInfo struct {
	Name         string `json:"name"`
	Unit         string `json:"unit"`
	HigherBetter bool   `json:"higher_better"`
}

// Point is one configuration (or gate side) and its repetitions.
type Point struct {
	Label    string            `json:"label"`
	Settings map[string]string `json:"settings"` // the varied keys' values
	Runs     []RunRef          `json:"runs"`
	// Stats are the metrics over the repetitions, by metric name (absent: no samples).
	Stats map[string]Stat `json:"stats"`
	// Hist says, per histogram, how many of the runs had a lossless histogram to merge.
	Hist map[string]int `json:"hist"`
}

// RunRef links one repetition.
type RunRef struct {
	ID     string `json:"id"`
	Report string `json:"report,omitempty"` // its report.html, relative to the page ("" when missing)
	Result string `json:"result"`
}

// Stat is one metric over repetitions.
type Stat struct {
	N      int       `json:"n"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"` // ascending
}

// FailedRun is a sweep run without a result (or with an error).
type FailedRun struct {
	Label  string `json:"label"`
	Repeat int    `json:"repeat"`
	Error  string `json:"error"`
}

// CostRow is one cost key's median per point (NaN-free: nil where a point lacks it).
type CostRow struct {
	Key    string     `json:"key"`
	Values []*float64 `json:"values"`
}

// Chart is one chart: the script draws it as SVG and puts its data table under it.
type Chart struct {
	ID      string `json:"id"`
	Section string `json:"section"` // the page section it belongs to
	Title   string `json:"title"`
	// Kind is "line" (series of x,y points) or "points" (categorical x, a median marker and a
	// min..max bar per series and category).
	Kind   string   `json:"kind"`
	X      ChartAx  `json:"x"`
	Y      ChartAx  `json:"y"`
	Series []Series `json:"series"`
	Bands  []Band   `json:"bands,omitempty"` // shaded x ranges (fault windows)
	Marks  []Mark   `json:"marks,omitempty"` // instants (instantaneous faults, ISR events)
	Note   string   `json:"note,omitempty"`
}

// ChartAx is an axis. Scale: "linear", "log", "percentile" (values are percentiles 0..100,
// drawn at 1/(1-q) on a log scale, as HdrHistogram's plotter does) or "category" (values are
// indexes into Categories).
type ChartAx struct {
	Label      string   `json:"label"`
	Scale      string   `json:"scale"`
	Unit       string   `json:"unit,omitempty"` // "µs" formats values as µs/ms/s
	Categories []string `json:"categories,omitempty"`
	Min        *float64 `json:"min,omitempty"`
	Max        *float64 `json:"max,omitempty"`
}

// Series is one line (or one set of points). Style picks the colour, dash pattern and marker,
// so a point keeps its look across charts.
type Series struct {
	Name  string    `json:"name"`
	Style int       `json:"style"`
	Step  bool      `json:"step,omitempty"` // draw as steps (values that hold until the next x)
	X     []float64 `json:"x"`
	Y     []float64 `json:"y"`
	Lo    []float64 `json:"lo,omitempty"` // spread of "points" charts
	Hi    []float64 `json:"hi,omitempty"`
	N     []int     `json:"n,omitempty"` // repetitions per point of "points" charts
}

// Band is a shaded x range with a label.
type Band struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Label string  `json:"label"`
}

// Mark is an instant on the x axis.
type Mark struct {
	At    float64 `json:"at"`
	Kind  string  `json:"kind"` // "fault", "shrink", "expand", "change"
	Label string  `json:"label"`
}

func ptr[T any](v T) *T { return &v }

// round keeps d decimals (timeline rates need no more than the interval's precision).
func round(v float64, d int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	p := math.Pow10(d)
	return math.Round(v*p) / p
}

// fmtNum formats a config number the way result.json wrote it (integers without exponent).
func fmtNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
