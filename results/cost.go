package results

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Cost scopes (Cost.Scope).
const (
	// CostScopeProcess: the cluster runs in the measuring process (the embedded target), so the
	// process's CPU, allocations and context switches are the cluster's and the clients' together,
	// and the cluster's system calls and requests are counted where it issues them.
	CostScopeProcess = "process"
	// CostScopeClients: the cluster is elsewhere (kafka://, kfake is in-process but not isrbench's
	// core): the CPU, allocations and context switches are the clients' and the harness's only;
	// the cluster's system calls, requests and bytes are unknown and left out.
	CostScopeClients = "clients"
)

// Cost is result.json's "cost" object: what the measurement window (warm-up end to run end)
// cost per acknowledged record. CPU, allocations, GC and context switches are the whole
// process's deltas over the window; system calls, requests and bytes are counted by the core
// and the wire server where they issue them (Scope says which of these are known). A nil
// *Cost in a Result means the run did not measure cost (older result.json files). A plain
// value, shared read-only like its Result.
type Cost struct {
	Scope   string  `json:"scope"`    // CostScopeProcess or CostScopeClients
	Records int64   `json:"records"`  // acknowledged records of the window: the divisor
	WindowS float64 `json:"window_s"` // seconds the counters were read apart

	// CPU time (getrusage of the process, user + system), µs per record, and the average number
	// of cores it kept busy.
	CPUUsPerRecord       float64 `json:"cpu_us_per_record"`
	CPUUserUsPerRecord   float64 `json:"cpu_user_us_per_record"`
	CPUSystemUsPerRecord float64 `json:"cpu_system_us_per_record"`
	CPUCores             float64 `json:"cpu_cores"`
	// CPUUsPerRequest is the same CPU per request the leaders handled (Produce and Fetch): it
	// does not move with how many records a request batches, which a loaded machine changes
	// (the gate's steadiest CPU metric, cpu/req). Absent for CostScopeClients.
	CPUUsPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	// AllocsPerRequest and SyscallsPerRequest are the process's heap allocations and the
	// cluster's system calls per such request (allocs/req, syscalls/req: as steady as cpu/req).
	AllocsPerRequest   float64 `json:"allocs_per_request,omitempty"`
	SyscallsPerRequest float64 `json:"syscalls_per_request,omitempty"`
	// The CPU time split by pprof labels (profiles.SideOf) of a CPU profile over the window:
	// CPUUsPerRecord times each side's share of the samples. Absent when no profile could be
	// taken (another CPU profile was running).
	CPUClusterUsPerRecord *float64 `json:"cpu_cluster_us_per_record,omitempty"`
	CPUClientsUsPerRecord *float64 `json:"cpu_clients_us_per_record,omitempty"`
	CPUOtherUsPerRecord   *float64 `json:"cpu_other_us_per_record,omitempty"`
	CPUSplitSamples       int64    `json:"cpu_split_samples,omitempty"` // profile samples the split rests on
	CPUSplitSource        string   `json:"cpu_split_source,omitempty"`  // the profile: "profiles/cpu.pprof" or "cost profile"
	// CPUProfileCoverage is the profile's CPU time over the window's getrusage CPU time (about 1
	// when the profiler saw every thread's CPU); below 0.5 the split is left out (Note says so).
	CPUProfileCoverage float64 `json:"cpu_profile_coverage,omitempty"`

	// Go runtime (runtime/metrics): heap allocations and bytes per record, GC cycles in the
	// window and the GC's CPU time per record (an estimate of the runtime's, included in CPU).
	AllocsPerRecord     float64 `json:"allocs_per_record"`
	AllocBytesPerRecord float64 `json:"alloc_bytes_per_record"`
	GCCycles            int64   `json:"gc_cycles"`
	GCCPUUsPerRecord    float64 `json:"gc_cpu_us_per_record"`

	// SyscallsPerRecord are the cluster's system calls per record by kind (SyscallKinds, each
	// present, 0 when none) and "total". Absent for CostScopeClients.
	SyscallsPerRecord map[string]float64 `json:"syscalls_per_record,omitempty"`
	// Requests per record, leader side: Produce requests, Fetch requests (consumers' and
	// followers'), of which replica fetches, and Fetch responses written.
	ProduceRequestsPerRecord      float64 `json:"produce_requests_per_record,omitempty"`
	FetchRequestsPerRecord        float64 `json:"fetch_requests_per_record,omitempty"`
	ReplicaFetchRequestsPerRecord float64 `json:"replica_fetch_requests_per_record,omitempty"`
	FetchResponsesPerRecord       float64 `json:"fetch_responses_per_record,omitempty"`
	// Follower side: replica Fetch requests the followers' fetchers sent, responses they decoded.
	FollowerFetchRequestsPerRecord  float64 `json:"follower_fetch_requests_per_record,omitempty"`
	FollowerFetchResponsesPerRecord float64 `json:"follower_fetch_responses_per_record,omitempty"`
	// Bytes per record the cluster copied between user space and the kernel (socket reads and
	// writes, file reads and writes; BytesCopiedByPath splits them) and sent zero-copy (sendfile).
	BytesCopiedPerRecord   float64            `json:"bytes_copied_per_record,omitempty"`
	BytesCopiedByPath      map[string]float64 `json:"bytes_copied_by_path_per_record,omitempty"`
	BytesZeroCopyPerRecord float64            `json:"bytes_zero_copy_per_record,omitempty"`
	// BytesTLSCopyPerRecord is the part of the copied bytes that were Fetch records written
	// through TLS: a plaintext listener sends those of at least isrbench.zero.copy.min.bytes
	// with sendfile, which cannot write through TLS.
	BytesTLSCopyPerRecord float64 `json:"bytes_tls_copy_per_record,omitempty"`

	// Request time of the cluster per record (Kafka's request metrics, summed over the requests
	// of every broker): RequestTimePerRecord by kind (RequestKinds) on the leaders, and the time
	// the followers took to apply the replica fetch responses. LocalUsPerRecord is the work: the
	// local time of every kind plus the followers' apply time (local/rec, the cost metric the
	// gate weighs most: it leaves out waiting, so it moves with the CPU the code spends on a
	// record and not with the idle overhead that whole-process CPU also counts). Absent for
	// CostScopeClients.
	LocalUsPerRecord         float64                `json:"local_us_per_record,omitempty"`
	RequestTimePerRecord     map[string]RequestTime `json:"request_time_per_record,omitempty"`
	FollowerApplyUsPerRecord float64                `json:"follower_apply_us_per_record,omitempty"`

	// Context switches of the process (getrusage ru_nvcsw, ru_nivcsw) per record.
	VoluntaryCtxSwitchesPerRecord   float64 `json:"voluntary_ctx_switches_per_record"`
	InvoluntaryCtxSwitchesPerRecord float64 `json:"involuntary_ctx_switches_per_record"`

	// RunQueueWait is how long the process's threads were runnable but waiting for a CPU. nil
	// where the kernel keeps no scheduler statistics (Note says so).
	RunQueueWait *RunQueueWait `json:"run_queue_wait,omitempty"`

	// Note says how to read the figures (what the scope leaves out, why the split is missing).
	Note string `json:"note,omitempty"`
}

// RunQueueWait is the time the process's threads spent runnable but waiting for a CPU over
// the window: the kernel's sched_info run_delay of every thread (/proc/self/task/TID/schedstat).
// It is the part of the latencies that is neither the work nor the I/O but a CPU that was not
// free: the host's other load, or more of the process's threads runnable than it has CPUs.
type RunQueueWait struct {
	UsPerRecord float64 `json:"us_per_record"` // µs per record, summed over the threads
	Threads     float64 `json:"threads"`       // threads waiting at any moment, on average (thread-s per s)
	UsPerSlice  float64 `json:"us_per_slice"`  // mean wait each time a thread was put on a CPU
}

// RequestTime is where one kind of request spent its time, per record of the window: Requests
// per record and µs per record working (LocalUs, Kafka's LocalTimeMs), waiting for the followers
// or parked in a long poll (RemoteUs, RemoteTimeMs), and writing the response (SendUs,
// ResponseSendTimeMs, sendfile included).
type RequestTime struct {
	Requests float64 `json:"requests"`
	LocalUs  float64 `json:"local_us"`
	RemoteUs float64 `json:"remote_us"`
	SendUs   float64 `json:"send_us"`
}

// RequestKinds are the keys of Cost.RequestTimePerRecord: Produce requests, Fetch requests of
// followers (replica_fetch) and of consumers (consumer_fetch), and every other API (other).
var RequestKinds = []string{"produce", "replica_fetch", "consumer_fetch", "other"}

// SyscallKinds are the keys of Cost.SyscallsPerRecord besides "total", in the order tables show
// them: socket read/write, sendfile and sendmsg (MSG_MORE) of the wire server and the replica
// fetchers; pread, pwrite, pwritev, write and fsync of the log and the checkpoints;
// io_uring_enter of isrbench.io=uring.
var SyscallKinds = []string{"read", "write", "sendfile", "sendmsg", "pread", "pwrite", "pwritev", "fsync", "io_uring_enter"}

// CopyPaths are the keys of Cost.BytesCopiedByPath.
var CopyPaths = []string{"socket_read", "socket_write", "file_read", "file_write"}

// ClusterKnown reports whether the cluster-side figures (system calls, requests, bytes) were
// counted.
func (c *Cost) ClusterKnown() bool { return c != nil && c.Scope == CostScopeProcess }

// SyscallsTotal is SyscallsPerRecord["total"] (0 when absent).
func (c *Cost) SyscallsTotal() float64 {
	if c == nil {
		return 0
	}
	return c.SyscallsPerRecord["total"]
}

// printCost prints the cost lines of a run summary (nothing when c is nil).
func printCost(w io.Writer, c *Cost) error {
	if c == nil {
		return nil
	}
	var rows [][]string
	add := func(cells ...string) { rows = append(rows, cells) }
	cpuDetail := fmt.Sprintf("user %s + system %s µs; %s cores busy", fmtCost(c.CPUUserUsPerRecord), fmtCost(c.CPUSystemUsPerRecord), fmtCost(c.CPUCores))
	add("cpu µs", fmtCost(c.CPUUsPerRecord), cpuDetail)
	if c.ClusterKnown() {
		add("  per request µs", fmtCost(c.CPUUsPerRequest), fmt.Sprintf("per produce and fetch request the leaders handled; %s allocations, %s syscalls per request",
			fmtCost(c.AllocsPerRequest), fmtCost(c.SyscallsPerRequest)))
	}
	if c.CPUClusterUsPerRecord != nil && c.CPUClientsUsPerRecord != nil && c.CPUOtherUsPerRecord != nil {
		add("  cluster / clients / other µs", fmtCost(*c.CPUClusterUsPerRecord)+" / "+fmtCost(*c.CPUClientsUsPerRecord)+" / "+fmtCost(*c.CPUOtherUsPerRecord),
			fmt.Sprintf("by pprof labels, %d samples of the %s%s", c.CPUSplitSamples, orDash(c.CPUSplitSource), coverage(c.CPUProfileCoverage)))
	}
	if c.ClusterKnown() && c.RequestTimePerRecord != nil {
		var kinds []string
		for _, k := range RequestKinds {
			if rt, ok := c.RequestTimePerRecord[k]; ok && rt.Requests > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %s", strings.ReplaceAll(k, "_", " "), fmtCost(rt.LocalUs)))
			}
		}
		kinds = append(kinds, "follower apply "+fmtCost(c.FollowerApplyUsPerRecord))
		add("local µs", fmtCost(c.LocalUsPerRecord), "request handlers working, not waiting (LocalTimeMs): "+strings.Join(kinds, ", "))
		if p, ok := c.RequestTimePerRecord["produce"]; ok {
			add("  remote / send µs", fmtCost(p.RemoteUs)+" / "+fmtCost(p.SendUs), "produce: waiting for the HW (RemoteTimeMs) / writing responses (ResponseSendTimeMs)")
		}
	}
	add("allocations", fmtCost(c.AllocsPerRecord), fmtCost(c.AllocBytesPerRecord)+" bytes")
	add("gc cpu µs", fmtCost(c.GCCPUUsPerRecord), fmt.Sprintf("%d gc cycles in the window", c.GCCycles))
	add("context switches", fmtCost(c.VoluntaryCtxSwitchesPerRecord+c.InvoluntaryCtxSwitchesPerRecord),
		"voluntary "+fmtCost(c.VoluntaryCtxSwitchesPerRecord)+", involuntary "+fmtCost(c.InvoluntaryCtxSwitchesPerRecord))
	if q := c.RunQueueWait; q != nil {
		add("run-queue wait µs", fmtCost(q.UsPerRecord), fmt.Sprintf("the process's threads runnable, waiting for a CPU (schedstat run_delay): %s waiting on average, %s µs each time one was put on a CPU",
			fmtCost(q.Threads), fmtCost(q.UsPerSlice)))
	}
	if c.ClusterKnown() {
		var kinds []string
		for _, k := range SyscallKinds {
			if v := c.SyscallsPerRecord[k]; v != 0 {
				kinds = append(kinds, k+" "+fmtCost(v))
			}
		}
		add("cluster syscalls", fmtCost(c.SyscallsTotal()), strings.Join(kinds, ", "))
		add("produce requests", fmtCost(c.ProduceRequestsPerRecord), "leader side")
		add("fetch requests", fmtCost(c.FetchRequestsPerRecord),
			fmt.Sprintf("leader: %s replica, %s responses; follower: %s sent, %s responses", fmtCost(c.ReplicaFetchRequestsPerRecord),
				fmtCost(c.FetchResponsesPerRecord), fmtCost(c.FollowerFetchRequestsPerRecord), fmtCost(c.FollowerFetchResponsesPerRecord)))
		var paths []string
		for _, p := range CopyPaths {
			if v := c.BytesCopiedByPath[p]; v != 0 {
				paths = append(paths, strings.ReplaceAll(p, "_", " ")+" "+fmtCost(v))
			}
		}
		add("bytes copied", fmtCost(c.BytesCopiedPerRecord), strings.Join(paths, ", "))
		zc := "sendfile"
		if c.BytesTLSCopyPerRecord > 0 {
			zc = fmt.Sprintf("sendfile; %s fetch record bytes went over TLS, through the copy path (sendfile cannot write through TLS)", fmtCost(c.BytesTLSCopyPerRecord))
		}
		add("bytes zero-copy", fmtCost(c.BytesZeroCopyPerRecord), zc)
	}
	// The detail column folds first: it is the widest.
	t := newTable(w, 2, "cost per record", "value", "detail")
	for _, r := range rows {
		t.Append(toAny(r)...)
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: cost table: %w", err)
	}
	if c.Note != "" {
		fmt.Fprintf(w, "cost: %s\n", c.Note)
	}
	return nil
}

// coverage renders a profile's coverage of the CPU time for the split's detail ("" when
// unknown: a result.json from before it was recorded).
func coverage(c float64) string {
	if c <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f%% of the CPU time)", 100*c)
}

// fmtCost renders a per-record figure: 4 significant digits (FormatValue), 0 as "0".
func fmtCost(v float64) string {
	if v == 0 {
		return "0"
	}
	return FormatValue(v)
}

// benchCost appends r's cost units to a bench.txt line (nothing without cost). Units end in
// "/record" (the benchmark's N is records); cluster-side units only when they were counted.
func benchCost(b *strings.Builder, c *Cost) {
	if c == nil {
		return
	}
	add := func(v float64, unit string) {
		b.WriteByte(' ')
		b.WriteString(fmtBenchSig(v))
		b.WriteByte(' ')
		b.WriteString(unit)
	}
	add(c.CPUUsPerRecord, "cpu-µs/record")
	if c.CPUClusterUsPerRecord != nil && c.CPUClientsUsPerRecord != nil {
		add(*c.CPUClusterUsPerRecord, "cpu-cluster-µs/record")
		add(*c.CPUClientsUsPerRecord, "cpu-clients-µs/record")
	}
	add(c.AllocsPerRecord, "allocs/record")
	add(c.AllocBytesPerRecord, "alloc-B/record")
	add(c.GCCPUUsPerRecord, "gc-cpu-µs/record")
	add(c.VoluntaryCtxSwitchesPerRecord, "vcsw/record")
	add(c.InvoluntaryCtxSwitchesPerRecord, "ivcsw/record")
	if c.RunQueueWait != nil {
		add(c.RunQueueWait.UsPerRecord, "runq-wait-µs/record")
	}
	if !c.ClusterKnown() {
		return
	}
	add(c.LocalUsPerRecord, "local-µs/record")
	for _, k := range RequestKinds {
		if rt, ok := c.RequestTimePerRecord[k]; ok {
			add(rt.LocalUs, strings.ReplaceAll(k, "_", "-")+"-local-µs/record")
		}
	}
	add(c.FollowerApplyUsPerRecord, "follower-apply-µs/record")
	add(c.CPUUsPerRequest, "cpu-µs/request")
	add(c.AllocsPerRequest, "allocs/request")
	add(c.SyscallsPerRequest, "syscalls/request")
	add(c.SyscallsTotal(), "syscalls/record")
	kinds := make([]string, 0, len(c.SyscallsPerRecord))
	for k := range c.SyscallsPerRecord {
		if k != "total" {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		add(c.SyscallsPerRecord[k], "sys-"+k+"/record")
	}
	add(c.ProduceRequestsPerRecord, "produce-reqs/record")
	add(c.FetchRequestsPerRecord, "fetch-reqs/record")
	add(c.FetchResponsesPerRecord, "fetch-resps/record")
	add(c.FollowerFetchRequestsPerRecord, "follower-fetch-reqs/record")
	add(c.BytesCopiedPerRecord, "copied-B/record")
	add(c.BytesZeroCopyPerRecord, "zerocopy-B/record")
}

// fmtBenchSig renders v with 6 significant digits, without an exponent ("417.598", "0.000667").
func fmtBenchSig(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmtBenchVal(v)
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		return fmtBenchVal(v)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// costMetrics are the compare/gate metrics of the cost object, all lower-is-better.
func costMetrics() []Metric {
	c := func(name, unit string, get func(*Cost) (float64, bool)) Metric {
		return Metric{Name: name, Unit: unit, Get: func(r *Result) (float64, bool) {
			if r.Cost == nil || r.Cost.Records <= 0 {
				return 0, false
			}
			return get(r.Cost)
		}}
	}
	always := func(f func(*Cost) float64) func(*Cost) (float64, bool) {
		return func(c *Cost) (float64, bool) { return f(c), true }
	}
	cluster := func(f func(*Cost) float64) func(*Cost) (float64, bool) {
		return func(c *Cost) (float64, bool) { return f(c), c.ClusterKnown() }
	}
	split := func(f func(*Cost) *float64) func(*Cost) (float64, bool) {
		return func(c *Cost) (float64, bool) {
			if p := f(c); p != nil {
				return *p, true
			}
			return 0, false
		}
	}
	return []Metric{
		c("cpu/rec", "µs", always(func(c *Cost) float64 { return c.CPUUsPerRecord })),
		c("cpu-user/rec", "µs", always(func(c *Cost) float64 { return c.CPUUserUsPerRecord })),
		c("cpu-sys/rec", "µs", always(func(c *Cost) float64 { return c.CPUSystemUsPerRecord })),
		c("cpu-cluster/rec", "µs", split(func(c *Cost) *float64 { return c.CPUClusterUsPerRecord })),
		c("cpu-clients/rec", "µs", split(func(c *Cost) *float64 { return c.CPUClientsUsPerRecord })),
		c("allocs/rec", "allocs", always(func(c *Cost) float64 { return c.AllocsPerRecord })),
		c("alloc-bytes/rec", "B", always(func(c *Cost) float64 { return c.AllocBytesPerRecord })),
		c("gc-cpu/rec", "µs", always(func(c *Cost) float64 { return c.GCCPUUsPerRecord })),
		c("ctxsw/rec", "switches", always(func(c *Cost) float64 { return c.VoluntaryCtxSwitchesPerRecord + c.InvoluntaryCtxSwitchesPerRecord })),
		c("runq-wait/rec", "µs", func(c *Cost) (float64, bool) {
			if c.RunQueueWait == nil {
				return 0, false
			}
			return c.RunQueueWait.UsPerRecord, true
		}),
		c("local/rec", "µs", cluster(func(c *Cost) float64 { return c.LocalUsPerRecord })),
		c("produce-local/rec", "µs", cluster(func(c *Cost) float64 { return c.RequestTimePerRecord["produce"].LocalUs })),
		c("cpu/req", "µs", cluster(func(c *Cost) float64 { return c.CPUUsPerRequest })),
		c("allocs/req", "allocs", cluster(func(c *Cost) float64 { return c.AllocsPerRequest })),
		c("syscalls/req", "calls", cluster(func(c *Cost) float64 { return c.SyscallsPerRequest })),
		c("syscalls/rec", "calls", cluster(func(c *Cost) float64 { return c.SyscallsTotal() })),
		c("produce-reqs/rec", "reqs", cluster(func(c *Cost) float64 { return c.ProduceRequestsPerRecord })),
		c("fetch-reqs/rec", "reqs", cluster(func(c *Cost) float64 { return c.FetchRequestsPerRecord })),
		c("copied-bytes/rec", "B", cluster(func(c *Cost) float64 { return c.BytesCopiedPerRecord })),
	}
}
