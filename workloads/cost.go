package workloads

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/internal/sched"
	"github.com/isrbench/isrbench/netfetch"
	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/target"
)

// The cost accounting of a run (result.json "cost"): the process's and the core's counters are
// read when the measurement window starts and when the producers stop at its end, and the
// differences are divided by the window's acknowledged records.
//
//   - CPU time, user and system, and context switches: getrusage(RUSAGE_SELF) of the whole
//     process (every thread), the figures a benchmark's ns/op would cover.
//   - The CPU split between the cluster and the clients: Go cannot account CPU per goroutine
//     (goroutines move between threads, so per-thread clocks say nothing about roles), and timing
//     each request with a thread clock would add system calls to the hot path. The goroutines
//     already carry pprof labels (broker, role), so a CPU profile of the window (Go's, 100 Hz per
//     thread) gives each side's share of the samples, and the share times the getrusage CPU is the
//     side's CPU per record. With --profile cpu the split is read from that profile itself, so
//     "isrbench profile top --by role" shows the same split; otherwise the meter takes its own
//     profile in memory (cost about 0.5% CPU at 100 Hz).
//   - Allocations, allocated bytes, GC cycles and GC CPU: runtime/metrics.
//   - System calls, requests and bytes of the cluster: the cluster's own counters
//     (cluster.Cost: its file system, its brokers' log writers, its wire servers and replica
//     fetchers; one atomic add at each call site), read through the target, so another cluster
//     in the same process does not add to them (the io_uring_enter calls of the process's one
//     ring count to the cluster whose write made them). getrusage, runtime/metrics and the CPU profile are
//     per process by nature: they measure the process's threads, heap and GC, which the
//     clusters and clients of the process share.

// minProfileCoverage is the smallest part of the window's CPU time (getrusage) a CPU profile
// must hold for its label shares to give the split. Go's profiler asks the kernel for a SIGPROF
// per 10 ms of each thread's CPU time, and Linux checks those CPU-time timers at scheduler
// ticks, on the thread that is running then. A lightly loaded process runs in bursts of tens of
// microseconds; on a tickless-idle kernel (NO_HZ_IDLE, the usual virtual machine) a CPU that
// idles between bursts takes few ticks, so many bursts are never seen. On the 2-core
// development VM a run at 1000 records/s kept anywhere from under 1% to about 80% of its CPU
// time in cpu.pprof (perf stat counted the signals the kernel raised: 24 in a bad run, 392 in a
// good one), and the threads it missed were missed whole, so the label shares of such a
// profile are noise; an unthrottled run keeps nearly all of it.
const minProfileCoverage = 0.5

// cpuProfileFile is the cpu.pprof among a run's profile files ("" when none).
func cpuProfileFile(files []string) string {
	for _, f := range files {
		if filepath.Base(f) == "cpu.pprof" {
			return f
		}
	}
	return ""
}

// costSample is one reading of every counter.
type costSample struct {
	at                          time.Time
	utime, stime                time.Duration
	nvcsw, nivcsw               int64
	allocs, allocBytes, gcCount uint64
	gcCPU                       float64     // seconds (runtime/metrics estimate, updated per GC cycle)
	waits                       sched.Waits // the threads' scheduler statistics (nil: waitsErr)
	waitsErr                    error
	cluster                     cluster.Cost // the in-process cluster's (zero without one)
}

var costMetricNames = []string{
	"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects", "/gc/heap/allocs:bytes",
	"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds",
}

// readCostSample reads the process's counters and, when cc is not nil, its cluster's.
func readCostSample(cc target.CostCounter) costSample {
	s := costSample{at: time.Now()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.utime = time.Duration(ru.Utime.Nano())
		s.stime = time.Duration(ru.Stime.Nano())
		s.nvcsw, s.nivcsw = ru.Nvcsw, ru.Nivcsw
	}
	ms := make([]metrics.Sample, len(costMetricNames))
	for i, n := range costMetricNames {
		ms[i].Name = n
	}
	metrics.Read(ms)
	u := func(i int) uint64 {
		if ms[i].Value.Kind() == metrics.KindUint64 {
			return ms[i].Value.Uint64()
		}
		return 0
	}
	s.allocs, s.allocBytes, s.gcCount = u(0)+u(1), u(2), u(3)
	if ms[4].Value.Kind() == metrics.KindFloat64 {
		s.gcCPU = ms[4].Value.Float64()
	}
	if cc != nil {
		s.cluster = cc.Cost()
	}
	s.waits, s.waitsErr = sched.ReadWaits()
	return s
}

// costMeter measures one window. start and stop come from the runner's goroutine (start through
// the goroutine startCostAt launches); the fields are read after stop.
type costMeter struct {
	mu struct {
		sync.Mutex
		started, stopped bool
		start, end       costSample
		prof             bytes.Buffer // own CPU profile (ownProfile)
		profiling        bool
		profErr          error
	}
	ownProfile bool               // take a CPU profile for the split (no --profile cpu)
	quit       chan struct{}      // closed by stop: a window not started yet never starts
	cluster    target.CostCounter // the target's cluster counters, nil when not in this process
}

// startCostAt starts the meter at the window start (at) on its own goroutine and returns it;
// stop ends it (idempotent, also when the window never started). profile is --profile (the
// meter takes its own CPU profile without cpu), cluster the target's counters (nil when the
// cluster is not in this process).
func startCostAt(ctx context.Context, at time.Time, profile []string, cluster target.CostCounter) *costMeter {
	m := &costMeter{ownProfile: !slices.Contains(profile, "cpu"), quit: make(chan struct{}), cluster: cluster}
	go func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-m.quit:
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.mu.stopped {
			return
		}
		if m.ownProfile {
			if err := pprof.StartCPUProfile(&m.mu.prof); err != nil {
				m.mu.profErr = err
			} else {
				m.mu.profiling = true
			}
		}
		m.mu.started = true
		m.mu.start = readCostSample(m.cluster)
	}()
	return m
}

// stop reads the end of the window (the first call only) and stops the meter's own profile.
func (m *costMeter) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.stopped {
		return
	}
	m.mu.stopped = true
	close(m.quit)
	if !m.mu.started {
		return
	}
	m.mu.end = readCostSample(m.cluster)
	if m.mu.profiling {
		pprof.StopCPUProfile()
		m.mu.profiling = false
	}
}

// cost builds result.json's cost object for records acknowledged records (nil when the window
// never started); cpuProfile is the run's cpu.pprof when --profile cpu was given.
func (m *costMeter) cost(records int64, clusterInProcess bool, cpuProfile string) *results.Cost {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.started || !m.mu.stopped {
		return nil
	}
	a, b := m.mu.start, m.mu.end
	c := &results.Cost{Scope: results.CostScopeClients, Records: records, WindowS: b.at.Sub(a.at).Seconds()}
	if clusterInProcess {
		c.Scope = results.CostScopeProcess
	}
	var notes []string
	per := func(v float64) float64 {
		if records <= 0 {
			return 0
		}
		return v / float64(records)
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	user, sys := b.utime-a.utime, b.stime-a.stime
	c.CPUUsPerRecord = per(us(user + sys))
	c.CPUUserUsPerRecord = per(us(user))
	c.CPUSystemUsPerRecord = per(us(sys))
	if c.WindowS > 0 {
		c.CPUCores = (user + sys).Seconds() / c.WindowS
	}
	c.AllocsPerRecord = per(float64(b.allocs - a.allocs))
	c.AllocBytesPerRecord = per(float64(b.allocBytes - a.allocBytes))
	c.GCCycles = int64(b.gcCount - a.gcCount)
	c.GCCPUUsPerRecord = per((b.gcCPU - a.gcCPU) * 1e6)
	c.VoluntaryCtxSwitchesPerRecord = per(float64(b.nvcsw - a.nvcsw))
	c.InvoluntaryCtxSwitchesPerRecord = per(float64(b.nivcsw - a.nivcsw))
	if err := cmp.Or(a.waitsErr, b.waitsErr); err != nil {
		notes = append(notes, "no run-queue wait: "+err.Error())
	} else {
		w := sched.WaitsDelta(a.waits, b.waits)
		q := &results.RunQueueWait{UsPerRecord: per(us(w.Wait)), UsPerSlice: us(w.WaitPerSlice())}
		if c.WindowS > 0 {
			q.Threads = w.Wait.Seconds() / c.WindowS
		}
		c.RunQueueWait = q
	}

	// The split by pprof labels.
	var split profiles.Split
	var serr error
	switch {
	case !m.ownProfile && cpuProfile != "":
		split, serr = profiles.SplitFile(cpuProfile)
		c.CPUSplitSource = filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(cpuProfile)), filepath.Base(cpuProfile)))
	case !m.ownProfile:
		serr = fmt.Errorf("the cpu profile was not written")
	case m.mu.profErr != nil:
		serr = m.mu.profErr
	default:
		split, serr = profiles.ReadSplit(bytes.NewReader(m.mu.prof.Bytes()))
		c.CPUSplitSource = "cost profile"
	}
	if serr == nil && user+sys > 0 {
		c.CPUProfileCoverage = float64(split.Total()) / float64(user+sys)
	}
	switch {
	case serr != nil:
		notes = append(notes, "no cluster/clients split of the CPU: "+serr.Error())
	case split.Total() == 0:
		notes = append(notes, "no cluster/clients split of the CPU: the profile has no samples")
	case user+sys > 0 && c.CPUProfileCoverage < minProfileCoverage:
		notes = append(notes, fmt.Sprintf("no cluster/clients split of the CPU: the CPU profile holds %.0f%% of the CPU time getrusage counted in the window (%d samples); "+
			"the kernel checks the profiler's CPU-time timers at scheduler ticks, which the short bursts of a lightly loaded process on a tickless host often miss, "+
			"so its shares are not the run's (and a flame graph of it shows part of the work); profile under more load or over a longer window",
			100*c.CPUProfileCoverage, split.Samples))
	default:
		cpu := c.CPUUsPerRecord
		cl, cn, ot := cpu*split.Share(profiles.SideCluster), cpu*split.Share(profiles.SideClients), cpu*split.Share(profiles.SideOther)
		c.CPUClusterUsPerRecord, c.CPUClientsUsPerRecord, c.CPUOtherUsPerRecord = &cl, &cn, &ot
		c.CPUSplitSamples = split.Samples
	}

	if clusterInProcess {
		d := b.cluster.Sub(a.cluster)
		v, l, n := d.VFS, d.Log, d.Net
		kinds := map[string]int64{
			"read": n.Read, "write": n.Write + v.Write, "sendfile": n.Sendfile, "sendmsg": n.Sendmsg,
			"pread": v.Pread, "pwrite": v.Pwrite + l.Pwrite, "pwritev": l.Pwritev, "fsync": v.Fsync,
			"io_uring_enter": l.IOUringEnter + n.UringEnter,
		}
		c.SyscallsPerRecord = map[string]float64{}
		for _, k := range results.SyscallKinds {
			c.SyscallsPerRecord[k] = per(float64(kinds[k]))
		}
		var total int64
		for _, k := range results.SyscallKinds {
			total += kinds[k]
		}
		c.SyscallsPerRecord["total"] = per(float64(total))
		if reqs := float64(n.ProduceRequests + n.FetchRequests); reqs > 0 {
			c.CPUUsPerRequest = us(user+sys) / reqs
			c.AllocsPerRequest = float64(b.allocs-a.allocs) / reqs
			c.SyscallsPerRequest = float64(total) / reqs
		}
		reqTime := func(t netfetch.ReqTime) results.RequestTime {
			return results.RequestTime{Requests: per(float64(t.Requests)), LocalUs: per(us(t.Local)), RemoteUs: per(us(t.Remote)), SendUs: per(us(t.Send))}
		}
		c.FollowerApplyUsPerRecord = per(us(d.ApplyTime))
		c.LocalUsPerRecord = c.FollowerApplyUsPerRecord
		c.RequestTimePerRecord = make(map[string]results.RequestTime, len(results.RequestKinds))
		for i, t := range []netfetch.ReqTime{n.Produce, n.ReplicaFetch, n.ConsumerFetch, n.Other} { // RequestKinds' order
			rt := reqTime(t)
			c.RequestTimePerRecord[results.RequestKinds[i]] = rt
			c.LocalUsPerRecord += rt.LocalUs
		}
		c.ProduceRequestsPerRecord = per(float64(n.ProduceRequests))
		c.FetchRequestsPerRecord = per(float64(n.FetchRequests))
		c.ReplicaFetchRequestsPerRecord = per(float64(n.ReplicaFetchRequests))
		c.FetchResponsesPerRecord = per(float64(n.FetchResponses))
		c.FollowerFetchRequestsPerRecord = per(float64(n.FollowerFetchRequests))
		c.FollowerFetchResponsesPerRecord = per(float64(n.FollowerFetchResponses))
		copied := map[string]int64{"socket_read": n.ReadBytes, "socket_write": n.WriteBytes,
			"file_read": v.ReadBytes, "file_write": v.WriteBytes + l.WriteBytes}
		c.BytesCopiedByPath = map[string]float64{}
		var sum int64
		for _, p := range results.CopyPaths {
			c.BytesCopiedByPath[p] = per(float64(copied[p]))
			sum += copied[p]
		}
		c.BytesCopiedPerRecord = per(float64(sum))
		c.BytesZeroCopyPerRecord = per(float64(n.SendfileBytes))
		c.BytesTLSCopyPerRecord = per(float64(n.TLSCopyBytes))
	} else {
		notes = append(notes, "the cluster is not in this process: only the clients' side is known (CPU, allocations, GC and context switches of the clients and the harness); the cluster's system calls, requests and bytes are not counted")
	}
	if records <= 0 {
		notes = append(notes, "no acknowledged records in the window: the per-record figures are 0")
	}
	for i, n := range notes {
		if i == 0 {
			c.Note = n
		} else {
			c.Note += "; " + n
		}
	}
	return c
}
