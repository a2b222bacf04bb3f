package results

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MergeInfo is result.json merged: the workers a merged result was made of.
type MergeInfo struct {
	Workers []MergedWorker `json:"workers"` // in worker order
	// ClockNote says how the clock offsets were estimated.
	ClockNote string `json:"clock_note"`
}

// MergedWorker is one worker's part of a merged result.
type MergedWorker struct {
	Index      int              `json:"index"`
	Dir        string           `json:"dir"`
	ID         string           `json:"id"`
	Records    int64            `json:"records"` // acknowledged in the measurement
	Durability DurabilityCounts `json:"durability"`
	// ClockOffsetUs is this worker's clock minus worker 1's, ± ClockBoundUs; nil when it
	// could not be measured (no consumer read the other's records). Worker 1's is 0.
	ClockOffsetUs *float64 `json:"clock_offset_us,omitempty"`
	ClockBoundUs  *float64 `json:"clock_bound_us,omitempty"`
}

// MergeRuns merges the run directories of the N workers of one multi-worker run (isrbench run
// --worker K/N --start-at T) into outDir: result.json, one .hgrm per histogram, timeline.csv
// and bench.txt. Histograms are merged losslessly (the HdrHistogram of each worker's
// result.json, same range and precision); throughput and durability counts are summed;
// faults, ISR figures and the target's settings are worker 1's (it ran the faults and set the
// cluster); the timelines are aligned by wall time (see mergeTimelines). Every worker 1..N
// must be given once, all of the same spec, settings, start time and duration; errors name
// the directory and what differs.
func MergeRuns(dirs []string, outDir string) (*Result, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("results: merge: no run directories")
	}
	type worker struct {
		dir string
		r   *Result
	}
	ws := make([]worker, 0, len(dirs))
	for _, d := range dirs {
		p := d
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			p = filepath.Join(d, "result.json")
		}
		r, err := ReadResult(p)
		if err != nil {
			return nil, fmt.Errorf("results: merge: %w", err)
		}
		if r.Worker == nil {
			return nil, fmt.Errorf("results: merge: %s is not a worker's run (no worker in result.json: run each with isrbench run --worker K/N --start-at TIME)", p)
		}
		ws = append(ws, worker{filepath.Dir(p), r})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].r.Worker.Index < ws[j].r.Worker.Index })
	first := ws[0].r
	n := first.Worker.Count
	for i, w := range ws {
		wi := w.r.Worker
		switch {
		case wi.Count != n:
			return nil, fmt.Errorf("results: merge: %s is worker %d/%d, %s is worker %d/%d: not one run", w.dir, wi.Index, wi.Count, ws[0].dir, first.Worker.Index, n)
		case !wi.StartAt.Equal(first.Worker.StartAt):
			return nil, fmt.Errorf("results: merge: %s started at %s, %s at %s: not one run", w.dir, wi.StartAt.Format(time.RFC3339Nano), ws[0].dir, first.Worker.StartAt.Format(time.RFC3339Nano))
		case w.r.Name != first.Name || w.r.DurationS != first.DurationS:
			return nil, fmt.Errorf("results: merge: %s is %s for %gs, %s is %s for %gs: not one run", w.dir, w.r.Name, w.r.DurationS, ws[0].dir, first.Name, first.DurationS)
		case i > 0 && wi.Index == ws[i-1].r.Worker.Index:
			return nil, fmt.Errorf("results: merge: worker %d given twice (%s and %s)", wi.Index, ws[i-1].dir, w.dir)
		}
		if k, a, b, ok := mergeConfigDiff(first.Config, w.r.Config); !ok {
			return nil, fmt.Errorf("results: merge: %s has %s=%v, %s has %s=%v: not one run", ws[0].dir, k, a, w.dir, k, b)
		}
	}
	if len(ws) != n {
		var missing []string
		have := map[int]bool{}
		for _, w := range ws {
			have[w.r.Worker.Index] = true
		}
		for k := 1; k <= n; k++ {
			if !have[k] {
				missing = append(missing, strconv.Itoa(k))
			}
		}
		return nil, fmt.Errorf("results: merge: %d of %d workers given; missing worker %s", len(ws), n, strings.Join(missing, ", "))
	}

	m := &Result{Schema: SchemaVersion, ID: first.ID + "-merged", Name: first.Name, Target: first.Target,
		StartedAt: first.StartedAt, DurationS: first.DurationS, Env: first.Env, Config: first.Config,
		ISR: first.ISR, Faults: first.Faults, TargetConfig: first.TargetConfig, Notes: map[string]string{}}
	for k, v := range first.Notes {
		if k != "faults" {
			m.Notes[k] = v
		}
	}
	m.Produced.Errors = map[string]int64{}
	hists := map[string]*Histogram{}
	summaries := func(r *Result) map[string]*Summary {
		return map[string]*Summary{"ack_latency": &r.AckLatencyUs, "hw_lag": &r.HWLagUs, "e2e_latency": &r.E2ELatencyUs,
			"send_delay": &r.SendDelayUs, "hw_lag_client": r.HWLagClientUs, "hw_lag_client_send": r.HWLagClientSendUs,
			"commit_latency": r.CommitLatencyUs, "lso_lag": r.LSOLagUs, "e2e_read_committed": r.E2EReadCommittedUs}
	}
	info := &MergeInfo{}
	for _, w := range ws {
		r := w.r
		for name, s := range summaries(r) {
			if s == nil {
				continue
			}
			h, err := DecodeSummaryHdr(*s)
			if err != nil {
				return nil, fmt.Errorf("results: merge: %s %s_us: %w", w.dir, name, err)
			}
			if hists[name] == nil {
				hists[name] = NewHistogram()
			}
			hists[name].Merge(h)
		}
		m.Produced.Records += r.Produced.Records
		m.Produced.Bytes += r.Produced.Bytes
		for k, v := range r.Produced.Errors {
			m.Produced.Errors[k] += v
		}
		m.Durability.DurabilityCounts = sumCounts(m.Durability.DurabilityCounts, r.Durability.DurabilityCounts)
		for k, c := range r.Durability.ByAcks {
			if m.Durability.ByAcks == nil {
				m.Durability.ByAcks = map[string]DurabilityCounts{}
			}
			m.Durability.ByAcks[k] = sumCounts(m.Durability.ByAcks[k], c)
		}
		m.Transactions = mergeTransactions(m.Transactions, r.Transactions)
		info.Workers = append(info.Workers, MergedWorker{Index: r.Worker.Index, Dir: w.dir, ID: r.ID,
			Records: r.Produced.Records, Durability: r.Durability.DurabilityCounts})
	}
	m.Durability.ReplicasIdentical = true
	for _, w := range ws {
		m.Durability.ReplicasIdentical = m.Durability.ReplicasIdentical && w.r.Durability.ReplicasIdentical
		if w.r.Durability.LossExpected != "" {
			m.Durability.LossExpected = w.r.Durability.LossExpected
		}
	}
	if m.DurationS > 0 {
		m.Produced.RecordsPerSec = float64(m.Produced.Records) / m.DurationS
		m.Produced.MBPerSec = float64(m.Produced.Bytes) / m.DurationS / 1e6
	}
	sum := func(name string) Summary {
		if h := hists[name]; h != nil {
			return Summarize(h)
		}
		return Summarize(NewHistogram())
	}
	m.AckLatencyUs, m.HWLagUs, m.E2ELatencyUs, m.SendDelayUs = sum("ack_latency"), sum("hw_lag"), sum("e2e_latency"), sum("send_delay")
	if hists["hw_lag_client"] != nil {
		a, s := sum("hw_lag_client"), sum("hw_lag_client_send")
		m.HWLagClientUs, m.HWLagClientSendUs = &a, &s
	}
	m.CommitLatencyUs, m.LSOLagUs, m.E2EReadCommittedUs = optSum(hists, "commit_latency"), optSum(hists, "lso_lag"), optSum(hists, "e2e_read_committed")
	offsets := clockOffsets(ws[0].r.Worker, func(k int) *WorkerInfo { return ws[k-1].r.Worker })
	for i := range info.Workers {
		if o, ok := offsets[info.Workers[i].Index]; ok {
			off, bound := o[0], o[1]
			info.Workers[i].ClockOffsetUs, info.Workers[i].ClockBoundUs = &off, &bound
		}
	}
	info.ClockNote = "offset of worker K's clock from worker 1's = (m(1->K) - m(K->1)) / 2, within (m(1->K) + m(K->1)) / 2, where m(A->B) is the least (receive time at B - intended send time at A) over A's records B's consumers read (worker.peer_delay_min_us)"
	m.Merged = info
	m.Note("merged", fmt.Sprintf("%d workers: histograms merged, throughput and durability summed; faults, ISR counts and target settings are worker 1's", n))

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("results: merge: %w", err)
	}
	for _, name := range []string{"ack_latency", "hw_lag", "e2e_latency", "send_delay", "hw_lag_client", "hw_lag_client_send", "commit_latency", "lso_lag", "e2e_read_committed"} {
		h := hists[name]
		if h == nil {
			if !strings.HasPrefix(name, "hw_lag_client") && !slices.Contains(txnHgrms, name) {
				h = NewHistogram()
			} else {
				continue
			}
		}
		p := filepath.Join(outDir, name+".hgrm")
		if err := writeWith(p, func(f *os.File) error { return WriteHgrm(f, h) }); err != nil {
			return nil, err
		}
		m.Files.Hgrm = append(m.Files.Hgrm, p)
	}
	tl, err := mergeTimelines(func(k int) (string, *Result) { return ws[k-1].dir, ws[k-1].r }, n, offsets, filepath.Join(outDir, "timeline.csv"))
	if err != nil {
		return nil, err
	}
	m.Files.Timeline = tl
	bp := filepath.Join(outDir, "bench.txt")
	if err := writeWith(bp, func(f *os.File) error { return WriteBench(f, m) }); err != nil {
		return nil, err
	}
	m.Files.Bench = bp
	if err := WriteResult(filepath.Join(outDir, "result.json"), m); err != nil {
		return nil, err
	}
	return m, nil
}

func writeWith(p string, fn func(f *os.File) error) error {
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("results: merge: %w", err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("results: merge: %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: merge: %w", err)
	}
	return nil
}

func sumCounts(a, b DurabilityCounts) DurabilityCounts {
	a.Acked += b.Acked
	a.Verified += b.Verified
	a.Lost += b.Lost
	a.Duplicated += b.Duplicated
	a.OutOfOrder += b.OutOfOrder
	a.Expired += b.Expired
	return a
}

// mergeConfigDiff returns the first key (sorted) whose values differ between a and b.
func mergeConfigDiff(a, b map[string]any) (key string, va, vb any, same bool) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			return k, a[k], b[k], false
		}
	}
	return "", nil, nil, true
}

// clockOffsets estimates, for each worker K with measurements both ways, its clock's offset
// from worker 1's and the bound of the estimate (µs): see MergeInfo.ClockNote.
func clockOffsets(w1 *WorkerInfo, worker func(k int) *WorkerInfo) map[int][2]float64 {
	out := map[int][2]float64{1: {0, 0}}
	for k := 2; k <= w1.Count; k++ {
		wk := worker(k)
		to, ok1 := wk.PeerDelayMinUs["1"]               // 1's records read at K: θ + δ(1->K)
		from, ok2 := w1.PeerDelayMinUs[strconv.Itoa(k)] // K's records read at 1: -θ + δ(K->1)
		if !ok1 || !ok2 {
			continue
		}
		out[k] = [2]float64{math.Round((to-from)/2*10) / 10, math.Round((to+from)/2*10) / 10}
	}
	return out
}

// mergeTimelines writes the workers' timeline.csv rows, aligned by wall time, into path: a
// row of worker K at t_s seconds after its measurement start happened at MeasureStart_K + t_s
// on its clock, which is corrected by its clock offset where measured, then placed in the
// interval of worker 1's timeline it falls in. Per interval: records/s, MB/s and errors are
// summed; ack and HW-lag p99 are the largest of the workers' (an upper bound of the merged
// p99: a quantile of a mixture is at most its components' largest); ISR columns are the min
// and max; a last column says how many workers had a row there. It returns path, or "" when
// no worker has a timeline.
func mergeTimelines(worker func(k int) (string, *Result), n int, offsets map[int][2]float64, path string) (string, error) {
	type bucket struct {
		row     TimelineRow
		workers int
	}
	var interval float64
	buckets := map[int64]*bucket{}
	_, r1 := worker(1)
	for k := 1; k <= n; k++ {
		dir, r := worker(k)
		p := filepath.Join(dir, "timeline.csv")
		if _, err := os.Stat(p); err != nil {
			if r.Files.Timeline == "" {
				continue
			}
			p = resolveFile(dir, r.Files.Timeline)
		}
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("results: merge: %w", err)
		}
		rows, _, err := ReadTimeline(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("results: merge: %s: %w", p, err)
		}
		if interval == 0 && len(rows) > 1 {
			interval = rows[1].T - rows[0].T
		}
		if interval <= 0 {
			interval = 1
		}
		shift := r.Worker.MeasureStart.Sub(r1.Worker.MeasureStart).Seconds()
		if o, ok := offsets[k]; ok {
			shift -= o[0] / 1e6
		}
		for _, row := range rows {
			t := row.T + shift
			key := int64(math.Round(t / interval))
			b := buckets[key]
			if b == nil {
				b = &bucket{row: TimelineRow{T: math.Round(float64(key)*interval*1000) / 1000, ISRMin: row.ISRMin, ISRMax: row.ISRMax}}
				buckets[key] = b
			}
			b.workers++
			x := &b.row
			x.RecordsPerS += row.RecordsPerS
			x.MBPerS += row.MBPerS
			x.Errors += row.Errors
			x.AckP99Us = math.Max(x.AckP99Us, row.AckP99Us)
			x.HWLagP99Us = math.Max(x.HWLagP99Us, row.HWLagP99Us)
			x.ISRMin, x.ISRMax = min(x.ISRMin, row.ISRMin), max(x.ISRMax, row.ISRMax)
			x.UnderReplicated, x.UnderMinISR = max(x.UnderReplicated, row.UnderReplicated), max(x.UnderMinISR, row.UnderMinISR)
		}
	}
	if len(buckets) == 0 {
		return "", nil
	}
	keys := make([]int64, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("results: merge: %w", err)
	}
	tl, err := NewTimeline(f, "workers")
	if err != nil {
		f.Close()
		return "", err
	}
	for _, k := range keys {
		b := buckets[k]
		b.row.Extra = []any{b.workers}
		if err := tl.Write(b.row); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := tl.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("results: merge: %w", err)
	}
	return path, nil
}
