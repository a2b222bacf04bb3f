package load

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
)

// Many load generators: `isrbench run --worker K/N --start-at TIME` runs the K-th of N
// workers of one spec, each on its own machine, all against one cluster, and `isrbench merge
// DIR...` (results.MergeRuns) merges their run directories into one result.
//
//   - The spec describes the whole load. Its producers are numbered across the producer
//     groups (0, 1, ...); worker K runs producer g when g mod N = K-1, at the producer's rate
//     (group rate / group count), so the total rate is the spec's. Producer ids are derived
//     from the spec name and TIME, the same on every worker, so the record ids (producer id,
//     sequence) of the workers never collide and each record names its worker.
//   - Every worker starts its load at TIME (RFC 3339, on its own clock), its warm-up and
//     measurement follow; the setup (topic, settings, clients) must be done by then.
//   - Worker 1 applies the spec's settings to the cluster (and restores them) and runs the
//     fault schedule; the others wait until the cluster shows the settings and run no faults.
//   - Each worker's consumers read every partition: end-to-end latency counts its own
//     records; the records of the other workers give the clock comparison: the least
//     (receive here - intended send there) per worker, result.json worker.peer_delay_min_us,
//     from which merge estimates the offset between two workers' clocks as half the
//     difference of the two directions, within half their sum (as NTP does).
//   - Each worker checks the durability of its own records; merge sums the counts.
//   - Consumer groups (consumers.group.id) are refused: the workers' members would share the
//     partitions and each would see only part of its own records.

// Worker names one worker of a multi-worker run; the zero Worker is a single-process run.
// A plain value.
type Worker struct {
	K, N    int       // 1 <= K <= N
	StartAt time.Time // when every worker starts its load
}

// ParseWorker parses --worker K/N and --start-at TIME (RFC 3339, e.g. 2026-05-01T12:00:00Z).
// Both or neither must be given.
func ParseWorker(kn, startAt string) (Worker, error) {
	if kn == "" && startAt == "" {
		return Worker{}, nil
	}
	if kn == "" || startAt == "" {
		return Worker{}, fmt.Errorf("--worker K/N and --start-at TIME go together (every worker starts its load at TIME)")
	}
	ks, ns, ok := strings.Cut(kn, "/")
	k, err1 := strconv.Atoi(strings.TrimSpace(ks))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err1 != nil || err2 != nil || n < 1 || n > 1024 || k < 1 || k > n {
		return Worker{}, fmt.Errorf("--worker %q: want K/N with 1 <= K <= N <= 1024, e.g. 2/3", kn)
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(startAt))
	if err != nil {
		return Worker{}, fmt.Errorf("--start-at %q: want an RFC 3339 time such as 2026-05-01T12:00:00Z (every worker the same)", startAt)
	}
	return Worker{K: k, N: n, StartAt: t}, nil
}

// Active reports whether w is one worker of several processes.
func (w Worker) Active() bool { return w.N > 0 }

// Owns reports whether the worker runs producer g (numbered across the spec's groups).
func (w Worker) Owns(g int) bool { return w.N == 0 || g%w.N == w.K-1 }

// First reports whether the worker is the one that changes the cluster and runs the faults.
func (w Worker) First() bool { return w.N == 0 || w.K == 1 }

func (w Worker) String() string { return fmt.Sprintf("%d/%d", w.K, w.N) }

// CheckSpec refuses a spec (and target) this worker cannot run its share of: the workers
// share one kafka:// cluster (on the embedded target each would have its own).
func (w Worker) CheckSpec(s *spec.Spec, target string) error {
	if !w.Active() {
		return nil
	}
	if !strings.HasPrefix(target, "kafka://") {
		return fmt.Errorf("--worker %s: the workers of a run share one cluster; give --target kafka://host:port,... (each embedded target is a cluster of its own)", w)
	}
	if s.Consumers.GroupID != "" && s.Consumers.Count > 0 && w.N > 1 {
		return fmt.Errorf("--worker %s with consumers.group.id %q: the workers' members would share the partitions and each worker would see only part of its records; drop the group.id (each worker's consumers then read every partition) or set consumers.count=0", w, s.Consumers.GroupID)
	}
	total, mine := 0, 0
	for _, g := range s.ProducerGroups() {
		for i := 0; i < g.Count; i, total = i+1, total+1 {
			if w.Owns(total) {
				mine++
			}
		}
	}
	if total > 0 && mine == 0 {
		return fmt.Errorf("--worker %s: the spec has %d producers for %d workers, so worker %d has none; set producers.count >= %d", w, total, w.N, w.K, w.N)
	}
	return nil
}

// idBase is the first producer id of a run: random for a single process, derived from the
// spec name and start time for workers (the same on each, so ids never collide).
func (w Worker) IDBase(name string, random uint32) uint32 {
	if !w.Active() {
		return random &^ 0xffff
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d/%d", name, w.StartAt.UnixNano(), w.N)
	return h.Sum32() &^ 0xffff
}

// PeerClock tracks, for one consumer, the least (receive - intended send) of the records of
// each worker (index K-1). Its consumer's goroutine owns it.
type PeerClock struct {
	base  uint32
	total int // producers in the spec
	n     int // workers
	min   []int64
}

func NewPeerClock(w Worker, base uint32, total int) *PeerClock {
	if !w.Active() {
		return nil
	}
	pc := &PeerClock{base: base, total: total, n: w.N, min: make([]int64, w.N)}
	for i := range pc.min {
		pc.min[i] = math.MaxInt64
	}
	return pc
}

// see notes one record of producer pid received delayNs after its intended send time.
func (pc *PeerClock) see(pid uint32, delayNs int64) {
	g := int(pid - pc.base)
	if pid < pc.base || g >= pc.total {
		return
	}
	if k := g % pc.n; delayNs < pc.min[k] {
		pc.min[k] = delayNs
	}
}
