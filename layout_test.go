package isrbench_test

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/isrbench/isrbench"

// allowed lists, for each package prefix of the module, the module packages it may import
// (DESIGN.md "Dependency direction"). A package not listed here may import nothing of the module.
var allowed = map[string][]string{
	"cmd/isrbench": {"workloads", "cluster", "netfetch", "core/", "results", "profiles", "iouring", "gate", "cmd/isrbench/internal/", "internal/clientprops", "internal/certs", "internal/replicaverify", "internal/sched"},
	// kafkatool: what the Kafka admin commands (topics, configs) do, over a kadm client only.
	"cmd/isrbench/internal/kafkatool": {},
	"gate":                            {"gate", "results", "profiles"},
	// workloads: the runner (phases, faults, timeline, verification, reports) over its three
	// packages below; spec is the language and imports none of them, target and load build on
	// spec alone (neither imports the other), specs is the embedded spec files (data only).
	"workloads":        {"workloads/spec", "workloads/target", "workloads/load", "workloads/internal/poll", "cluster", "netfetch", "core/", "results", "profiles", "internal/clientprops", "internal/certs", "internal/replicaverify", "internal/sched"},
	"workloads/spec":   {"workloads/specs", "core/config", "internal/clientprops", "internal/sched"},
	"workloads/specs":  {},
	"workloads/target": {"workloads/spec", "workloads/internal/poll", "cluster", "netfetch", "core/", "results", "internal/clientprops", "internal/certs"},
	"workloads/load":   {"workloads/spec", "workloads/internal/poll", "core/records", "results"},
	// poll: waiting on observable state with deadlines, for the three above (a leaf).
	"workloads/internal/poll": {},
	// cluster: the embedded cluster over netfetch's servers; adminapi serves it over HTTP;
	// clustertest starts one for tests (netfetch's external tests import it, its own never).
	"cluster":             {"cluster", "netfetch", "core/", "internal/kafkatest", "internal/clientprops", "internal/certs"},
	"cluster/adminapi":    {"cluster", "netfetch", "core/", "internal/kafkatest"},
	"cluster/clustertest": {"cluster", "netfetch", "core/"},
	// netfetch → iouring: the replica fetchers' send-then-receive (isrbench.replica.fetch.uring)
	// on the leaf binding, as core/log's writes.
	"netfetch": {"netfetch", "core/", "internal/kafkatest", "iouring"},
	// kafkatest: the raw Kafka client of wire-level tests (no module package below it).
	"internal/kafkatest": {"core/records"},
	"core/broker":        {"core/broker", "core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/group":         {"core/group", "core/broker", "core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/txn":           {"core/txn", "core/broker", "core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/partition":     {"core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/config":        {"core/config"},
	"core/controller":    {"core/controller", "core/vfs", "core/config"},
	"core/log":           {"core/log", "core/records", "core/vfs", "iouring"},
	"core/vfs":           {"core/vfs"},
	"core/records":       {"core/records"},
	"iouring":            {"iouring"},
	"results":            {"results"},
	"core/sim":           {"core/"},
	"internal/simflag":   {},
	// scripttest: the recorded-output script harness, imported by tests only.
	"internal/scripttest": {"internal/simflag"},
	// clientprops: Kafka client properties (--command-config) to franz-go options; certs: a
	// CA and certificates for serve --generate-tls and tests.
	"internal/clientprops": {"internal/certs"},
	// replicaverify: ReplicaVerificationTool's comparison over a kgo client (verify-replicas,
	// and the harness's replica check).
	"internal/replicaverify": {"core/records"},
	"internal/certs":         {},
	// sched: the kernel scheduling policy of the process's threads (sched.policy, serve
	// --sched-policy); a leaf on golang.org/x/sys/unix.
	"internal/sched": {},
	"profiles":       {"profiles"},
}

// stdlibOnly lists packages that may import, besides the standard library and the module
// packages the allowed table gives them, only the listed external packages: iouring is a
// binding on golang.org/x/sys/unix alone (no cgo: "C" is not stdlib); the controller, the
// vfs and the config registry are plain Go (the controller speaks Kafka's error codes).
var stdlibOnly = map[string][]string{
	"iouring":         {"golang.org/x/sys/unix"},
	"core/controller": {"github.com/twmb/franz-go/pkg/kerr"},
	"core/vfs":        {},
	"core/config":     {},
}

// isStdlib reports whether an import path is in the standard library (no dot in its first
// element; "C" is cgo, not stdlib).
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return path != "C" && !strings.Contains(first, ".")
}

// TestDependencyDirection fails when a package imports a module package that the layout forbids
// (for example core importing netfetch, or results importing core), imports an external
// package its stdlibOnly entry does not allow, or has tests that do not import internal/simflag.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports,TestGoFiles,XTestGoFiles", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			TestGoFiles, XTestGoFiles          []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// Every package with tests registers the simulator's flags, or
		// `go test ./... -run TestSimulation -sim.seed=N` fails in the packages that lack them.
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 && !slices.Contains(p.TestImports, module+"/internal/simflag") && !slices.Contains(p.XTestImports, module+"/internal/simflag") {
			t.Errorf("%s has tests but does not import internal/simflag (add a simflag_test.go)", p.ImportPath)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel == "" || rel == module {
			continue
		}
		rules, ok := rulesFor(rel)
		if !ok {
			t.Errorf("package %s is not in the layout of DESIGN.md; add it to the allowed table", rel)
			continue
		}
		for _, imp := range p.Imports {
			if rest, ok := stdlibOnly[rel]; ok && !slices.Contains(rest, imp) && !isStdlib(imp) && !strings.HasPrefix(imp, module+"/") {
				t.Errorf("%s imports %s: only %v and the standard library are allowed (no cgo)", rel, imp, rest)
			}
		}
		for _, imp := range append(p.Imports, p.TestImports...) {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if (dep == "internal/simflag" || dep == "internal/scripttest") && !slices.Contains(p.Imports, imp) {
				continue // test-only, everywhere (see the simflag check above)
			}
			if !permitted(rules, dep) {
				t.Errorf("%s imports %s: not allowed by the dependency direction (may import %v)", rel, dep, rules)
			}
		}
	}
}

func rulesFor(rel string) ([]string, bool) {
	best := ""
	for k := range allowed {
		if (rel == k || strings.HasPrefix(rel, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	r, ok := allowed[best]
	return r, ok
}

func permitted(rules []string, dep string) bool {
	for _, r := range rules {
		if dep == r || strings.HasPrefix(dep, r+"/") || (strings.HasSuffix(r, "/") && strings.HasPrefix(dep, r)) {
			return true
		}
	}
	return false
}

// maxFileLines is the most lines a non-test .go file of the module may have (generated files
// aside): a longer file holds more than one job and is split by job.
const maxFileLines = 600

// oversized lists non-test files allowed over maxFileLines, with their line counts: a shrinking
// allow-list (empty: every file is within the bound). A listed file may not grow past its count;
// one back at or under maxFileLines (or gone) must leave the list.
var oversized = map[string]int{}

// generated matches the header of a generated Go file (https://go.dev/s/generatedcode).
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestFileSizes fails when a non-test .go file that is not generated has more than
// maxFileLines lines, beyond the oversized allow-list.
func TestFileSizes(t *testing.T) {
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(b) {
			return nil
		}
		rel := filepath.ToSlash(path)
		n := bytes.Count(b, []byte("\n"))
		limit, listed := oversized[rel]
		seen[rel] = listed
		switch {
		case listed && n <= maxFileLines:
			t.Errorf("%s has %d lines, at most %d now: remove it from the oversized list", rel, n, maxFileLines)
		case listed && n > limit:
			t.Errorf("%s grew to %d lines (allowed %d while it is split, at most %d): split it by job instead", rel, n, limit, maxFileLines)
		case !listed && n > maxFileLines:
			t.Errorf("%s has %d lines, more than %d: split it by job", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range oversized {
		if _, ok := seen[rel]; !ok {
			t.Errorf("%s is in the oversized list but is not a non-test .go file of the module: remove it", rel)
		}
	}
}

// TestLayoutWorkloads pins the direction between the harness's packages: a wrong-way import
// (spec importing the runner, load importing target, ...) is refused by the allowed table
// that TestDependencyDirection applies.
func TestLayoutWorkloads(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		ok       bool
	}{
		{"workloads", "workloads/spec", true},
		{"workloads", "workloads/target", true},
		{"workloads", "workloads/load", true},
		{"workloads/target", "workloads/spec", true},
		{"workloads/load", "workloads/spec", true},
		{"workloads/spec", "workloads/specs", true},
		{"workloads/spec", "workloads", false},
		{"workloads/spec", "workloads/target", false},
		{"workloads/spec", "workloads/load", false},
		{"workloads/spec", "cluster", false},
		{"workloads/spec", "netfetch", false},
		{"workloads/specs", "workloads/spec", false},
		{"workloads/target", "workloads", false},
		{"workloads/target", "workloads/load", false},
		{"workloads/load", "workloads", false},
		{"workloads/load", "workloads/target", false},
		{"workloads/load", "cluster", false},
		{"workloads/load", "netfetch", false},
	} {
		rules, ok := rulesFor(tc.pkg)
		if !ok {
			t.Fatalf("%s has no rules in the allowed table", tc.pkg)
		}
		if got := permitted(rules, tc.dep); got != tc.ok {
			t.Errorf("%s importing %s: permitted %v, want %v (rules %v)", tc.pkg, tc.dep, got, tc.ok, rules)
		}
	}
}
