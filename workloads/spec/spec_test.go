package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/config"
)

func TestEmbeddedSpecsParse(t *testing.T) {
	names := SpecNames()
	for _, want := range []string{"default", "max-throughput", "acks-1", "fetchers", "fetch-wait", "follower-pause", "leader-kill", "gate"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("embedded spec %s missing (have %v)", want, names)
		}
	}
	for _, n := range names {
		s, err := Load(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if s.Name != n {
			t.Errorf("spec file %s.yaml has name %q", n, s.Name)
		}
	}
}

func TestDefaultSpecValues(t *testing.T) {
	for _, ref := range []string{"default", "default.yaml", "workloads/specs/default.yaml", "specs/default.yaml"} {
		s, err := Load(ref)
		if err != nil {
			t.Fatalf("Load(%q): %v", ref, err)
		}
		if s.Brokers != 3 || s.Topic.ReplicationFactor != 3 || s.Topic.MinInsyncReplicas != 2 || s.Topic.Partitions != 6 ||
			s.Producers.Acks != "all" || s.Producers.MessageSize != 1024 || s.Producers.Rate != 5000 ||
			s.Duration != 20*time.Second || s.Warmup != 5*time.Second {
			t.Fatalf("Load(%q) = %+v", ref, s)
		}
	}
	c, _ := Load("default")
	cfg := c.Config()
	if cfg["num.replica.fetchers"] != int64(1) || cfg["producers.acks"] != "all" || cfg["duration"] != "20s" ||
		cfg["topic.min.insync.replicas"] != 2 || cfg["isrbench.io"] != "pwritev" {
		t.Fatalf("Config() = %v", cfg)
	}
	if len(cfg) != len(Keys())+1 {
		t.Fatalf("Config() has %d keys, want every key (%d) + faults", len(cfg), len(Keys()))
	}
	f, _ := Load("fetchers")
	if !reflect.DeepEqual(f.SweepAxes(), []Axis{{Key: "num.replica.fetchers", Values: []string{"1", "2", "4"}}}) {
		t.Fatalf("fetchers sweep = %+v", f.SweepAxes())
	}
	lk, _ := Load("leader-kill")
	if len(lk.Faults) != 3 || lk.Faults[1].At != 8*time.Second || lk.Faults[1].Kind != "kill-broker" || lk.Faults[1].Target != "leader-of:isrbench-0" {
		t.Fatalf("leader-kill faults = %+v", lk.Faults)
	}
}

func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown top key", "name: x\nbrokerz: 3\n", []string{`unknown key "brokerz"`, "line 2", "brokers"}},
		{"unknown broker key", "broker:\n  num.replica.fetcher: 2\n", []string{`"broker.num.replica.fetcher"`, "num.replica.fetchers"}},
		{"unknown producer key", "producers: {ack: all}\n", []string{`"producers.ack"`, "acks"}},
		{"wrong type int", "broker:\n  num.replica.fetchers: two\n", []string{"num.replica.fetchers", `"two" is not an integer`, "allowed 1..64"}},
		{"wrong type bool", "broker: {unclean.leader.election.enable: maybe}\n", []string{"unclean.leader.election.enable", "true|false"}},
		{"wrong type duration", "duration: 20\n", []string{"duration", "not a duration", "20s"}},
		{"out of range", "topic: {partitions: 0}\n", []string{"topic.partitions", "0 is out of range", "allowed 1..10000"}},
		{"bad enum", "broker: {isrbench.io: mmap}\n", []string{"isrbench.io", `"mmap"`, "pwritev|uring|write"}},
		{"bad acks", "producers: {acks: 2}\n", []string{"producers.acks", "all|-1|1|0"}},
		{"small message", "producers: {message.size: 8}\n", []string{"producers.message.size", "allowed 24..1000000"}},
		{"rf above brokers", "brokers: 2\n", []string{"topic.replication.factor", "more than brokers", "allowed 1..2"}},
		{"min isr above rf", "topic: {replication.factor: 1, min.insync.replicas: 2}\n", []string{"topic.min.insync.replicas", "allowed 1..1"}},
		{"section not a map", "broker: 3\n", []string{"broker", "mapping"}},
		{"list for scalar", "brokers: [1, 2]\n", []string{"brokers", "single value"}},
		{"fault unknown key", "faults:\n  - {at: 1s, kind: pause, when: 2s}\n", []string{`faults[0].when`, "known: at, duration"}},
		{"fault kind", "faults: [{at: 1s, kind: reboot}]\n", []string{"faults[0].kind", "pause-broker|kill-broker|restart-broker|crash-broker|slow-link|partition"}},
		{"fault after end", "duration: 5s\nfaults: [{at: 6s, kind: pause}]\n", []string{"faults[0].at", "allowed 0s..5s"}},
		{"fault target", "faults: [{at: 1s, kind: pause, target: 7}]\n", []string{"faults[0].target", "broker ids 0..2"}},
		{"fault no kind", "faults: [{at: 1s}]\n", []string{"faults[0].kind is required"}},
		{"slow link params", "faults: [{at: 1s, kind: pause, latency: 5ms}]\n", []string{"only to kind slow-link"}},
		{"sweep unknown", "sweep: {fetchers: [1, 2]}\n", []string{"sweep", `"fetchers"`}},
		{"sweep bad value", "sweep: {num.replica.fetchers: [1, 100]}\n", []string{"num.replica.fetchers", "100 is out of range", "allowed 1..64"}},
		{"not a mapping", "- a\n- b\n", []string{"mapping at the top level"}},
		{"empty", "", []string{"empty spec"}},
		{"bad yaml", "name: [\n", []string{"yaml"}},
		{"duplicate key", "brokers: 3\nbrokers: 4\n", []string{"line 2", `duplicate key "brokers" (first at line 1)`}},
		{"duplicate broker key", "broker:\n  num.replica.fetchers: 2\n  num.replica.fetchers: 4\n", []string{"line 3", `duplicate key "broker.num.replica.fetchers" (first at line 2)`}},
		{"duplicate section", "topic: {partitions: 3}\ntopic: {name: x}\n", []string{`duplicate key "topic" (first at line 1)`}},
		{"duplicate in flow mapping", "producers: {rate: 1, rate: 2}\n", []string{`duplicate key "producers.rate"`}},
		{"duplicate fault key", "faults: [{at: 1s, at: 2s, kind: pause, duration: 1s}]\n", []string{`duplicate key "faults[0].at"`}},
		{"duplicate sweep key", "sweep:\n  acks: [all]\n  acks: [1]\n", []string{`duplicate key "sweep.acks" (first at line 2)`}},
		{"two spellings", "topic: {partitions: 3}\ntopic.partitions: 6\n", []string{"line 2", `"topic.partitions" sets topic.partitions, already set at line 1`}},
		{"two spellings of a broker key", "broker.num.replica.fetchers: 2\nbroker: {num.replica.fetchers: 4}\n", []string{"num.replica.fetchers, already set at line 1"}},
		{"producer list and flat key", "producers.rate: 100\nproducers: [{rate: 200}]\n", []string{"producers[0]", "sets producers.rate, already set at line 1"}},
		{"merge key", "producers: &p {rate: 100}\nconsumers: {<<: *p}\n", []string{"line 2", "merge keys (<<) are not supported"}},
		{"alias to nothing", "name: *nope\n", []string{"yaml", "unknown anchor"}},
		{"second document", "name: a\n---\nname: b\n", []string{"second YAML document"}},
		{"fault on another topic", "faults: [{at: 1s, duration: 1s, kind: pause, target: \"leader-of:other-0\"}]\n", []string{"faults[0].target", `names topic "other", which the spec does not have (its topic is isrbench`}},
		{"fault on a partition out of range", "faults: [{at: 1s, duration: 1s, kind: pause, target: \"leader-of:isrbench-6\"}]\n", []string{"faults[0].target", "topic isrbench has 6 partitions"}},
		{"sweep value twice", "sweep: {acks: [all, 1, all]}\n", []string{"sweep.acks: value all given twice"}},
		{"queued bytes below socket max", "broker: {queued.max.request.bytes: 1048576}\n", []string{"queued.max.request.bytes", "is less than socket.request.max.bytes (104857600)"}},
		{"idle 0", "broker: {connections.max.idle.ms: 0}\n", []string{"connections.max.idle.ms: 0 is out of range; allowed -1 or 1.."}},
		{"nothing to run", "producers: {count: 0}\nconsumers: {count: 0}\n", []string{"producers.count", "consumers.count", "nothing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse(%q) accepted", tc.yaml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSetKeys(t *testing.T) {
	for _, tc := range []struct {
		set  string
		key  string // canonical key to read back
		want any
	}{
		{"num.replica.fetchers=4", "num.replica.fetchers", int64(4)},
		{"broker.num.replica.fetchers=3", "num.replica.fetchers", int64(3)},
		{"producers.rate=0", "producers.rate", 0.0},
		{"rate=1234.5", "producers.rate", 1234.5},
		{"topic.partitions=12", "topic.partitions", 12},
		{"partitions=7", "topic.partitions", 7},
		{"acks=1", "producers.acks", "1"},
		{"producers.acks=-1", "producers.acks", "all"},
		{"min.insync.replicas=1", "topic.min.insync.replicas", 1},
		{"unclean.leader.election.enable=true", "unclean.leader.election.enable", true},
		{"flush.messages=9223372036854775807", "flush.messages", int64(9223372036854775807)},
		{"duration=2s", "duration", 2 * time.Second},
		{"isrbench.hw.update=mutex", "isrbench.hw.update", "mutex"},
		{"keys=uniform", "producers.keys", "uniform"},
		{"linger.ms=5", "producers.linger.ms", 5},
	} {
		t.Run(tc.set, func(t *testing.T) {
			s := DefaultSpec()
			if err := s.ApplySets([]string{tc.set}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s = %#v, want %#v", tc.key, got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ set, want string }{
		{"nokey", "want key=value"},
		{"=3", "want key=value"},
		{"fetchers=2", `unknown key "fetchers"`},
		{"num.replica.fetchers=0", "allowed 1..64"},
		{"acks=2", "all|-1|1|0"},
		{"rate=-1", "allowed 0..10000000"},
		{"brokers=1", "topic.replication.factor"}, // cross-field check after the sets
	} {
		s := DefaultSpec()
		err := s.ApplySets([]string{tc.set})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: error %v, want one containing %q", tc.set, err, tc.want)
		}
	}
}

func TestEveryKeyRoundTrips(t *testing.T) {
	// Every key's current value, printed, is accepted again; every alias finds its key.
	s := DefaultSpec()
	for _, p := range Params() {
		if err := s.Set(p.Key, fmt.Sprint(p.get(s))); err != nil {
			t.Errorf("%s: %v", p.Key, err)
		}
		for _, a := range p.Aliases {
			if q := Lookup(a); q == nil || q.Key != p.Key {
				t.Errorf("alias %s does not find %s", a, p.Key)
			}
		}
		if !strings.Contains(KeyHelp(), p.Key) {
			t.Errorf("KeyHelp lacks %s", p.Key)
		}
	}
}

func TestLoadFileAndUnknown(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(p, []byte("name: mine\nproducers: {rate: 100}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil || s.Name != "mine" || s.Producers.Rate != 100 || s.Brokers != 3 {
		t.Fatalf("Load(file) = %+v, %v", s, err)
	}
	if _, err := Load("nosuch"); err == nil || !strings.Contains(err.Error(), "embedded: ") {
		t.Fatalf("Load(nosuch) error %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("producers: {rate: fast}\n"), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "producers.rate") {
		t.Fatalf("Load(bad) error %v", err)
	}
}

func TestVary(t *testing.T) {
	axes, err := ParseVary([]string{"num.replica.fetchers=1,2,4", "acks=all,1"})
	if err != nil {
		t.Fatal(err)
	}
	pts := Points(axes)
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6", len(pts))
	}
	if pts[0].Label() != "num.replica.fetchers=1,producers.acks=all" || pts[5].Label() != "num.replica.fetchers=4,producers.acks=1" {
		t.Fatalf("points %v ... %v", pts[0].Label(), pts[5].Label())
	}
	s := DefaultSpec()
	if err := pts[3].Apply(s); err != nil || s.Settings.Int("num.replica.fetchers") != 2 || s.Producers.Acks != "1" {
		t.Fatalf("apply %s: %v %+v", pts[3].Label(), err, s.Settings.Given())
	}
	if len(Points(nil)) != 1 || Points(nil)[0].Label() != "" {
		t.Fatal("no axes must give one empty point")
	}
	for _, tc := range []struct{ flag, want string }{
		{"num.replica.fetchers", "want key=v1,v2"},
		{"num.replica.fetchers=", "no values"},
		{"fetchers=1,2", `unknown key "fetchers"`},
		{"num.replica.fetchers=1,x", `"x" is not an integer`},
	} {
		if _, err := ParseVary([]string{tc.flag}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--vary %s: %v, want %q", tc.flag, err, tc.want)
		}
	}
	if _, err := ParseVary([]string{"acks=1", "producers.acks=all"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate axis: %v", err)
	}
}

// TestSpecAnchorsAndAliases: an alias stands for a copy of its anchor (a fault written once,
// used twice), and a document whose aliases multiply (a "billion laughs") is an error after
// a bounded amount of work and memory, as is a spec over 1 MiB.
func TestSpecAnchorsAndAliases(t *testing.T) {
	s, err := Parse([]byte("duration: 10s\nfaults:\n  - &f {at: 1s, duration: 1s, kind: pause, target: 1}\n  - *f\nproducers: {count: &n 3}\nconsumers: {count: *n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 2 || s.Faults[1] != s.Faults[0] || s.Faults[1].Target != "1" || s.Consumers.Count != 3 {
		t.Fatalf("faults %+v, consumers %d", s.Faults, s.Consumers.Count)
	}

	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ { // 10^10 nodes once expanded
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Parse([]byte(b.String()))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 100000 YAML nodes (counting each alias *name as a copy of its anchor)") {
		t.Fatalf("billion laughs: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("billion laughs allocated %d bytes before failing, want a bounded amount (< 256 MiB)", alloc)
	}

	big := []byte("description: \"" + strings.Repeat("x", MaxSpecBytes) + "\"\n")
	if _, err := Parse(big); err == nil || !strings.Contains(err.Error(), "more than the 1048576 (1 MiB) allowed") {
		t.Errorf("huge spec: %v", err)
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("Load of a huge spec: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Load of a directory: %v", err)
	}
	// Deep nesting is bounded too.
	deep := "description: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n"
	if _, err := Parse([]byte(deep)); err == nil {
		t.Error("100-deep nesting accepted")
	}
}

// TestEveryIsrbenchSettingIsASpecKey: every isrbench.* broker setting of the registry (the
// levers the harness exists to compare) can be set from a spec and with `run --set`, so a
// new lever cannot be added that a sweep cannot switch.
func TestEveryIsrbenchSettingIsASpecKey(t *testing.T) {
	for _, e := range config.Entries() {
		if e.Fixed || !strings.HasPrefix(e.Name, "isrbench.") {
			continue
		}
		s := DefaultSpec()
		if err := s.Set(e.Name, e.Default); err != nil {
			t.Errorf("%s: not settable from a spec: %v", e.Name, err)
		}
	}
}
