package spec

import (
	"runtime"
	"testing"

	"github.com/isrbench/isrbench/workloads/specs"
)

// FuzzParse: any bytes give a spec or an error, never a panic; a parsed spec validates.
func FuzzParse(f *testing.F) {
	for _, n := range SpecNames() {
		b, _ := specs.FS.ReadFile(n + ".yaml")
		f.Add(b)
	}
	f.Add([]byte("faults: [{at: 1s, kind: pause}]\nsweep: {acks: [all, 1]}\n"))
	f.Add([]byte("broker: {num.replica.fetchers: 99999999999999999999}\n"))
	f.Add([]byte("brokers: 3\nbrokers: 4\ntopic: {partitions: 3}\ntopic.partitions: 6\n"))
	f.Add([]byte("duration: 10s\nfaults:\n  - &f {at: 1s, duration: 1s, kind: pause, target: 1}\n  - *f\nproducers: {count: &n 3}\nconsumers: {count: *n}\n"))
	f.Add([]byte("a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n"))
	f.Add([]byte("producers: &p {rate: 100}\nconsumers: {<<: *p}\n---\nname: b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Parse(b)
		runtime.ReadMemStats(&after)
		// Memory is bounded by the input (at most MaxSpecBytes), whatever its aliases.
		if alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(64<<20+256*len(b)); alloc > bound {
			t.Fatalf("Parse of %d bytes allocated %d bytes, more than %d", len(b), alloc, bound)
		}
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a spec Validate rejects: %v", err)
		}
		_ = s.Config()
	})
}
