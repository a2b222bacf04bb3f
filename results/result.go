package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// SchemaVersion is the version of result.json written by this package. ReadResult rejects any other.
const SchemaVersion = 1

// Result is one run's result.json (schema 1). Field names and JSON keys are the contract other
// tools (jq checks, compare, plots) rely on; add fields, never rename them.
//
// A Result is a plain value: build it in one goroutine, then share it read-only.
type Result struct {
	Schema    int       `json:"schema"`     // always SchemaVersion
	ID        string    `json:"id"`         // run id, unique per run (e.g. "20261129T164000-default-r1")
	Name      string    `json:"name"`       // workload spec name ("default", "follower-pause")
	Target    string    `json:"target"`     // "embedded" or "kafka://host:port,..."
	StartedAt time.Time `json:"started_at"` // RFC 3339 (UTC recommended)
	DurationS float64   `json:"duration_s"` // measured duration (warmup excluded), seconds
	Env       Env       `json:"env"`
	// Config holds every effective setting, flattened: "num.replica.fetchers": 2, "acks": "all",
	// "producers.rate": 5000. Values are JSON scalars (string, number, bool).
	Config map[string]any `json:"config"`

	Produced     Produced `json:"produced"`
	AckLatencyUs Summary  `json:"ack_latency_us"` // intended send -> produce acknowledged
	HWLagUs      Summary  `json:"hw_lag_us"`      // leader append -> HW passes the record (weighted by records)
	E2ELatencyUs Summary  `json:"e2e_latency_us"` // intended send -> consumer receives the record
	SendDelayUs  Summary  `json:"send_delay_us"`  // intended send -> actual send (open-loop pacer lateness)
	// HWLagClientUs and HWLagClientSendUs are the HW lag a client observes on any cluster:
	// from the produce acknowledgement, and from the intended send, to the first fetch
	// response whose HW is past the record (weighted by record); HWObserver says how it was
	// observed and its resolution. nil when no producer waited for acknowledgements.
	HWLagClientUs     *Summary    `json:"hw_lag_client_us,omitempty"`
	HWLagClientSendUs *Summary    `json:"hw_lag_client_send_us,omitempty"`
	HWObserver        *HWObserver `json:"hw_observer,omitempty"`
	// The histograms of a transactional run (nil otherwise, see txn.go): commit latency
	// (a transaction's first send -> EndTxn answered), LSO lag (the HW past a record -> the
	// LSO past it, weighted by record) and the read_committed consumers' e2e latency;
	// Transactions counts the transactions and holds the read_committed verdict.
	CommitLatencyUs    *Summary      `json:"commit_latency_us,omitempty"`
	LSOLagUs           *Summary      `json:"lso_lag_us,omitempty"`
	E2EReadCommittedUs *Summary      `json:"e2e_read_committed_us,omitempty"`
	Transactions       *Transactions `json:"transactions,omitempty"`

	// Probe is the one-at-a-time probe before the load (probe.records), nil when there was
	// none (probe.records=0, a worker of several, no producer).
	Probe *Probe `json:"probe,omitempty"`

	ISR        ISR        `json:"isr"`
	Durability Durability `json:"durability"`
	Faults     []Fault    `json:"faults,omitempty"`
	// Group is set when the consumers were members of a consumer group.
	Group *ConsumerGroup `json:"group,omitempty"`
	// TargetConfig lists the settings given to a kafka:// cluster, how, and what its
	// brokers reported afterwards (empty on the embedded target, built from the spec).
	TargetConfig []TargetSetting `json:"target_config,omitempty"`
	// Worker is set on the run of one worker of several (isrbench run --worker K/N);
	// Merged on the result isrbench merge makes of their runs.
	Worker *WorkerInfo `json:"worker,omitempty"`
	Merged *MergeInfo  `json:"merged,omitempty"`
	Cost   *Cost       `json:"cost,omitempty"` // nil: not measured (see Cost)
	Files  Files       `json:"files"`
	// Notes are remarks about how to read this run ("hw_lag": "measured inside the embedded
	// core only"), keyed by the field they concern. Not settings: compare ignores them.
	Notes map[string]string `json:"notes,omitempty"`
	// DamageFound counts the damaged batches the brokers found in their replicas during the
	// run (embedded: reads, follower appends, scrubs); each is named in notes.damage.
	DamageFound int64 `json:"damage_found,omitempty"`
}

// Note records a remark about field key (see Notes).
func (r *Result) Note(key, text string) {
	if r.Notes == nil {
		r.Notes = map[string]string{}
	}
	r.Notes[key] = text
}

// Env describes where a run ran.
type Env struct {
	Go     string `json:"go"`            // runtime.Version()
	GOOS   string `json:"goos"`          // runtime.GOOS
	GOARCH string `json:"goarch"`        // runtime.GOARCH
	CPUs   int    `json:"cpus"`          // GOMAXPROCS at run time
	Commit string `json:"commit"`        // VCS revision of the binary, "" if unknown
	CPU    string `json:"cpu,omitempty"` // CPU model name (for bench.txt's "cpu:" line)
	// CPUIdle is the kernel's cpuidle driver and governor ("haltpoll", "intel_idle/menu"),
	// with the haltpoll driver of a virtual machine also its guest_halt_poll_ns: how long an
	// idle vCPU polls before it halts. 0 halts at once, and every wake-up of an idle vCPU
	// then costs an exit to the host: on a 2-core VM that moved the default spec's ack p50 by
	// 25-50% and its CPU per record by about 11% (README, "What it measures").
	CPUIdle string `json:"cpuidle,omitempty"`
	// Sched is the kernel scheduling policy of the process's threads during the run (spec key
	// sched.policy): "batch" (SCHED_BATCH, a woken thread does not preempt a running one),
	// "other", or counts by policy when they differ. On a 2-core VM batch cut the default
	// spec's CPU per record by 15% and its ack p50 by a third (README, "The process's
	// scheduling policy").
	Sched string `json:"sched,omitempty"`
}

// CurrentEnv describes this process: Go version, OS/arch, GOMAXPROCS, the VCS revision baked into
// the binary (if any; commit overrides it when non-empty) and the CPU model from /proc/cpuinfo.
func CurrentEnv(commit string) Env {
	e := Env{Go: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.GOMAXPROCS(0), Commit: commit}
	if e.Commit == "" {
		e.Commit = vcsRevision()
	}
	e.CPU = cpuModel()
	e.CPUIdle = cpuIdle("/sys")
	return e
}

// cpuIdle describes the cpuidle settings under sysfs root (see Env.CPUIdle), "" when there is
// no cpuidle driver.
func cpuIdle(sys string) string {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(sys, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	drv := read("devices/system/cpu/cpuidle/current_driver")
	if drv == "" {
		return ""
	}
	s := drv
	gov := read("devices/system/cpu/cpuidle/current_governor")
	if gov == "" {
		gov = read("devices/system/cpu/cpuidle/current_governor_ro")
	}
	if gov != "" && gov != drv {
		s += "/" + gov
	}
	if ns := read("module/haltpoll/parameters/guest_halt_poll_ns"); drv == "haltpoll" && ns != "" {
		s += " guest_halt_poll_ns=" + ns
	}
	return s
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Produced counts what the producers sent and had acknowledged during the measured window.
type Produced struct {
	Records       int64            `json:"records"`         // acknowledged records
	Bytes         int64            `json:"bytes"`           // acknowledged value+key bytes
	RecordsPerSec float64          `json:"records_per_sec"` // Records / duration_s
	MBPerSec      float64          `json:"mb_per_sec"`      // Bytes / duration_s / 1e6
	Errors        map[string]int64 `json:"errors"`          // Kafka error name (NOT_ENOUGH_REPLICAS, ...) -> failed records
}

// Summary is one latency histogram: values in microseconds (µs), percentiles as the histogram
// reports them (highest equivalent value, 3 significant digits), plus the whole histogram as
// base64 HdrHistogram V2 compressed encoding (DecodeSummaryHdr reads it back).
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	P9999 float64 `json:"p9999"`
	Max   float64 `json:"max"`
	Hdr   string  `json:"hdr"`
}

// ISR counts ISR changes seen during the run (Kafka's IsrShrinksPerSec / IsrExpandsPerSec as
// totals; on the embedded target shrinks also count the ISR removals the controller makes when
// it fences a broker, which no leader's IsrShrinksPerSec sees). Shrinks = LeaderShrinks +
// ControllerShrinks; every expand is a leader's (AlterPartition).
type ISR struct {
	Shrinks int64 `json:"shrinks"`
	Expands int64 `json:"expands"`
	// LeaderShrinks are the leaders' AlterPartition shrinks (IsrShrinksPerSec: a follower
	// past replica.lag.time.max.ms); ControllerShrinks the controller's own removals (KRaft:
	// a fenced broker, an election leaving dead members out). A kafka:// target reports
	// neither split: both 0 there.
	LeaderShrinks     int64   `json:"leader_shrinks"`
	ControllerShrinks int64   `json:"controller_shrinks"`
	UnderReplicatedS  float64 `json:"under_replicated_s"` // seconds with UnderReplicatedPartitions > 0
}

// Durability is the verdict of the post-run checker on acknowledged records.
type Durability struct {
	DurabilityCounts
	ReplicasIdentical bool `json:"replicas_identical"` // all ISR replica logs byte-identical up to the HW
	// ByAcks splits the counts by the producer's acks setting ("all", "1", "0").
	ByAcks map[string]DurabilityCounts `json:"by_acks,omitempty"`
	// LossExpected is why acknowledged loss is expected from the settings (an unclean election,
	// truncate-to-HW, a crash without fsync); empty when a loss fails the run.
	LossExpected string `json:"loss_expected,omitempty"`
}

// DurabilityCounts are record counts; Verified+Lost+Expired == Acked when every acked record was checked.
type DurabilityCounts struct {
	Acked      int64 `json:"acked"`        // acknowledged to the producer
	Verified   int64 `json:"verified"`     // acknowledged and found, in order, after the run
	Lost       int64 `json:"lost"`         // acknowledged but missing
	Duplicated int64 `json:"duplicated"`   // found more than once
	OutOfOrder int64 `json:"out_of_order"` // found, but not in produce order within its partition/producer
	// Expired counts acknowledged records deleted by log retention before the read-back (older,
	// within their partition and producer, than the first record still above the log start).
	// They are neither verified nor lost: Verified+Lost+Expired == Acked.
	Expired int64 `json:"expired,omitempty"`
}

// Fault is one applied fault of the schedule.
type Fault struct {
	AtS    float64   `json:"at_s"`             // seconds since the measured start (negative = during warmup)
	EndS   float64   `json:"end_s,omitempty"`  // when it was undone (0 = instantaneous or never)
	Time   time.Time `json:"time"`             // wall-clock time it was applied
	Kind   string    `json:"kind"`             // "pause-broker", "kill-leader", "slow-link", ...
	Target string    `json:"target,omitempty"` // "broker=2", "link=1->3", "topic-0"
	Detail string    `json:"detail,omitempty"`
	Error  string    `json:"error,omitempty"` // non-empty when applying it failed
	// Exec and Undo are the commands of an exec fault as they ran (nil for other kinds, and
	// Undo nil without an undo command).
	Exec *ExecRun `json:"exec,omitempty"`
	Undo *ExecRun `json:"undo,omitempty"`
	// CatchUpS is, for a reassign fault, each moved partition ("topic-p") and the seconds
	// from the reassignment's start until its new replicas joined the ISR (absent: not
	// caught up when the measurement ended).
	CatchUpS map[string]float64 `json:"catch_up_s,omitempty"`
}

// HWObserver describes the client-side HW observation of a run: one Fetch in flight per
// partition leader at the highest HW seen, fetch.max.wait.ms FetchMaxWaitMs.
type HWObserver struct {
	FetchMaxWaitMs int   `json:"fetch_max_wait_ms"`
	Responses      int64 `json:"responses"` // fetch responses received
	Advances       int64 `json:"advances"`  // responses that showed an HW advance
	// RecordBytes is the record data the observer's fetches carried (at most one batch per
	// response: its cost on the cluster).
	RecordBytes int64 `json:"record_bytes"`
	// ResolutionUs is the p99, over the responses that showed an advance, of the time since
	// the previous response on the same connection: an advance is seen at most this long
	// (plus the response's one-way transit) after it happened. WindowP50Us is the median.
	ResolutionUs float64 `json:"resolution_us"`
	WindowP50Us  float64 `json:"window_p50_us"`
	// SeenBeforeAck counts records whose HW advance was seen before their acknowledgement
	// arrived (lag from the ack recorded as 0; every acks=all record); Unseen those whose
	// advance was never seen before the observer stopped (not in the histograms).
	SeenBeforeAck int64  `json:"seen_before_ack"`
	Unseen        int64  `json:"unseen"`
	Errors        int64  `json:"errors"` // failed fetches (a leader moving, a broker down)
	LastError     string `json:"last_error,omitempty"`
}

// WorkerInfo is one worker's part of a multi-worker run.
type WorkerInfo struct {
	Index        int       `json:"index"`         // K of K/N, 1-based
	Count        int       `json:"count"`         // N
	StartAt      time.Time `json:"start_at"`      // --start-at: when every worker started its load
	MeasureStart time.Time `json:"measure_start"` // the start of measurement on this worker's clock
	// PeerDelayMinUs maps a worker index ("1".."N") to the least (receive time here - intended
	// send time there) over that worker's records this worker's consumers read, µs: merge's
	// clock comparison (this worker's own entry is its least end-to-end latency).
	PeerDelayMinUs map[string]float64 `json:"peer_delay_min_us,omitempty"`
}

// TargetSetting is one setting of the spec as a kafka:// cluster got it.
type TargetSetting struct {
	Key      string `json:"key"`      // the spec's key (num.replica.fetchers, log.segment.bytes)
	Config   string `json:"config"`   // Kafka's config name on the resource (segment.bytes)
	Resource string `json:"resource"` // "brokers" (the cluster-wide default) or "topic NAME"
	Value    string `json:"value"`    // the value the spec asks for
	// How is create-topic, incremental-alter-configs, already-set (the cluster had it),
	// assumed (--assume: not checked where the brokers do not report it), unverified (a
	// read-only setting at the harness default that the brokers do not report), cluster-value
	// (a read-only setting at the harness default that the brokers run differently: Reported
	// has their value) or waited-for (another worker set it).
	How string `json:"how"`
	// Reported is what DescribeConfigs showed once it was in effect: broker id (or "topic")
	// -> value; Source its config source (DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, ...).
	Reported map[string]string `json:"reported,omitempty"`
	Source   string            `json:"source,omitempty"`
}

// ExecRun is one command of an exec fault.
type ExecRun struct {
	Command   string  `json:"command"`         // as run by sh -c, placeholders replaced
	ExitCode  int     `json:"exit_code"`       // -1 when it did not start or was killed
	DurationS float64 `json:"duration_s"`      // from start to exit
	Output    string  `json:"output"`          // file with its standard output and error
	Error     string  `json:"error,omitempty"` // why it failed ("exit status 1", "killed after the timeout of 1m0s")
}

// Files lists the run's output files as the runner wrote them (paths joined with the run
// directory, so absolute when --out is absolute). A relative one that does not exist as given
// is read from the directory holding result.json.
type Files struct {
	Hgrm     []string `json:"hgrm"`
	Timeline string   `json:"timeline"`
	Bench    string   `json:"bench"`
	Profiles []string `json:"profiles"`
	Plots    []string `json:"plots"`
	// Partitions is the per-partition timeline (every 100 ms up to 100 partitions, less often
	// above: leader, epoch, ISR, HW, LEO per replica); Faults is the fault report (times to
	// shrink/rejoin, producer-group figures).
	Partitions string `json:"partitions,omitempty"`
	Faults     string `json:"faults,omitempty"`
}

// WriteResult writes r as indented JSON to path atomically (temp file + rename). Schema is set to
// SchemaVersion when zero.
func WriteResult(path string, r *Result) error {
	if r.Schema == 0 {
		r.Schema = SchemaVersion
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode %s: %w", path, err)
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), ".result-*.json")
	if err != nil {
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	return nil
}

// ReadResult reads and checks one result.json. Errors name the file and, where JSON decoding
// says so, the field and byte offset; a schema other than SchemaVersion is rejected.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	r, err := DecodeResult(b)
	if err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	return r, nil
}

// DecodeResult parses result.json bytes (see ReadResult).
func DecodeResult(b []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(b, se.Offset)
			return nil, fmt.Errorf("invalid JSON at line %d column %d: %v", line, col, se)
		case errors.As(err, &te):
			return nil, fmt.Errorf("field %q: got JSON %s, want %v (offset %d)", te.Field, te.Value, te.Type, te.Offset)
		default:
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("field \"schema\": got %d, want %d", r.Schema, SchemaVersion)
	}
	for _, s := range []struct {
		name string
		s    *Summary
	}{{"ack_latency_us", &r.AckLatencyUs}, {"hw_lag_us", &r.HWLagUs}, {"e2e_latency_us", &r.E2ELatencyUs}, {"send_delay_us", &r.SendDelayUs}} {
		if s.s.Count < 0 {
			return nil, fmt.Errorf("field %q: count %d is negative", s.name+".count", s.s.Count)
		}
	}
	if r.DurationS < 0 {
		return nil, fmt.Errorf("field \"duration_s\": %v is negative", r.DurationS)
	}
	return &r, nil
}

func lineCol(b []byte, off int64) (line, col int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line = 1 + bytes.Count(b[:off], []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

// resolveFile returns p unchanged when absolute or when it exists as given, else joined with dir
// (the directory holding result.json).
func resolveFile(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return filepath.Join(dir, p)
}
