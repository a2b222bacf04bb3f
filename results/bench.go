package results

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// BenchPkg is the "pkg:" line of bench.txt.
const BenchPkg = "github.com/isrbench/isrbench/workloads"

// DefaultBenchKeys are config keys always put in a benchmark name when the config has them, so
// bench.txt files of separate runs get comparable names; keys that differ between the results
// given to one WriteBench call are added too.
var DefaultBenchKeys = []string{"acks", "replication.factor", "partitions", "num.replica.fetchers"}

// WriteBench writes results in Go benchmark format (benchstat reads it): a header with goos,
// goarch, pkg and cpu (from the first result's Env) and one line per result:
//
//	BenchmarkReplication/<name>/<key=value>/...-<cpus> <records> <v> records/s <v> MB/s <v> p50-ack-µs ...
//
// The key=value parts are DefaultBenchKeys present in the configs plus every key whose value
// differs between the results, sorted. Units: records/s, MB/s, p50-ack-µs, p99-ack-µs,
// p999-ack-µs, p99-hwlag-µs, p99-e2e-µs, with a one-at-a-time probe p50-probe-µs, queue-p50-x
// and queue-p99-x (the load's ack p50 and p99 over the probe's p50), in a transactional run
// p50-commit-µs, p99-commit-µs, p99-lsolag-µs and p99-e2erc-µs (a latency whose histogram is
// empty is left out), then
// with a cost object cpu-µs/record, cpu-cluster-µs/record, cpu-clients-µs/record,
// allocs/record, alloc-B/record, gc-cpu-µs/record, vcsw/record, ivcsw/record, runq-wait-µs/record
// (where the kernel keeps scheduler statistics) and, where the
// cluster's side was counted, syscalls/record, sys-<kind>/record per kind, produce-reqs/record,
// fetch-reqs/record, fetch-resps/record, follower-fetch-reqs/record, copied-B/record and
// zerocopy-B/record.
func WriteBench(w io.Writer, results ...*Result) error {
	if len(results) == 0 {
		return fmt.Errorf("results: WriteBench: no results")
	}
	bw := bufio.NewWriter(w)
	env := results[0].Env
	fmt.Fprintf(bw, "goos: %s\ngoarch: %s\npkg: %s\n", orDash(env.GOOS), orDash(env.GOARCH), BenchPkg)
	if env.CPU != "" {
		fmt.Fprintf(bw, "cpu: %s\n", env.CPU)
	}
	keys := benchKeys(results)
	for _, r := range results {
		bw.WriteString(BenchName(r, keys))
		n := r.Produced.Records
		if n < 1 {
			n = 1 // benchfmt requires N >= 1... a run that acknowledged nothing still reports its metrics
		}
		fmt.Fprintf(bw, " %d", n)
		fmt.Fprintf(bw, " %s records/s %s MB/s", fmtBenchVal(r.Produced.RecordsPerSec), fmtBenchVal(r.Produced.MBPerSec))
		if r.AckLatencyUs.Count > 0 {
			fmt.Fprintf(bw, " %s p50-ack-µs %s p99-ack-µs %s p999-ack-µs",
				fmtBenchVal(r.AckLatencyUs.P50), fmtBenchVal(r.AckLatencyUs.P99), fmtBenchVal(r.AckLatencyUs.P999))
		}
		if r.HWLagUs.Count > 0 {
			fmt.Fprintf(bw, " %s p99-hwlag-µs", fmtBenchVal(r.HWLagUs.P99))
		}
		if r.E2ELatencyUs.Count > 0 {
			fmt.Fprintf(bw, " %s p99-e2e-µs", fmtBenchVal(r.E2ELatencyUs.P99))
		}
		if p := r.Probe; p != nil && p.Queueing != nil {
			fmt.Fprintf(bw, " %s p50-probe-µs %s queue-p50-x %s queue-p99-x",
				fmtBenchVal(p.AckLatencyUs.P50), fmtBenchVal(p.Queueing.AckP50X), fmtBenchVal(p.Queueing.AckP99X))
		}
		if c := r.CommitLatencyUs; c != nil && c.Count > 0 {
			fmt.Fprintf(bw, " %s p50-commit-µs %s p99-commit-µs", fmtBenchVal(c.P50), fmtBenchVal(c.P99))
		}
		if l := r.LSOLagUs; l != nil && l.Count > 0 {
			fmt.Fprintf(bw, " %s p99-lsolag-µs", fmtBenchVal(l.P99))
		}
		if e := r.E2EReadCommittedUs; e != nil && e.Count > 0 {
			fmt.Fprintf(bw, " %s p99-e2erc-µs", fmtBenchVal(e.P99))
		}
		var cost strings.Builder
		benchCost(&cost, r.Cost)
		bw.WriteString(cost.String())
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtBenchVal(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// benchKeys: DefaultBenchKeys present in any config, plus keys whose values differ.
func benchKeys(rs []*Result) []string {
	set := map[string]bool{}
	for _, k := range DefaultBenchKeys {
		for _, r := range rs {
			if _, ok := r.Config[k]; ok {
				set[k] = true
			}
		}
	}
	for _, k := range VariedKeys(rs) {
		set[k] = true
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// VariedKeys returns the sorted config keys whose values differ between the results (a key
// missing from some results counts as differing), ignoring IgnoredConfigKeys.
func VariedKeys(rs []*Result) []string {
	all := map[string]bool{}
	for _, r := range rs {
		for k := range r.Config {
			all[k] = true
		}
	}
	var out []string
	for k := range all {
		if ignoredKey(k) {
			continue
		}
		first, firstOK := "", false
		for i, r := range rs {
			v, ok := r.Config[k]
			s := configString(v)
			if i == 0 {
				first, firstOK = s, ok
				continue
			}
			if ok != firstOK || s != first {
				out = append(out, k)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// BenchName is the benchmark name of r: BenchmarkReplication/<name>/<key=value>...-<cpus>.
// Spaces and slashes inside names and values become '_' so the name stays one legal field.
func BenchName(r *Result, keys []string) string {
	var sb strings.Builder
	sb.WriteString("BenchmarkReplication/")
	name := r.Name
	if name == "" {
		name = "unnamed"
	}
	sb.WriteString(benchSafe(name))
	for _, k := range keys {
		v, ok := r.Config[k]
		if !ok {
			continue
		}
		sb.WriteByte('/')
		sb.WriteString(benchSafe(k))
		sb.WriteByte('=')
		sb.WriteString(benchSafe(configString(v)))
	}
	cpus := r.Env.CPUs
	if cpus <= 0 {
		cpus = 1
	}
	fmt.Fprintf(&sb, "-%d", cpus)
	return sb.String()
}

func benchSafe(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, s)
}

// configString renders a config value the way tables and names show it.
func configString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	default:
		return fmt.Sprint(x)
	}
}
