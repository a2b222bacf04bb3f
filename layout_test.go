package isrbench_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/isrbench/isrbench"

// allowed lists, for each package prefix of the module, the module packages it may import
// (DESIGN.md "Dependency direction"). A package not listed here may import nothing of the module.
var allowed = map[string][]string{
	"cmd/isrbench":     {"workloads", "netfetch", "core/", "results", "profiles", "iouring", "gate"},
	"gate":             {"gate", "results", "profiles"},
	"workloads":        {"workloads", "netfetch", "core/", "results", "profiles"},
	"netfetch":         {"netfetch", "core/"},
	"core/broker":      {"core/broker", "core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/group":       {"core/group", "core/broker", "core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/partition":   {"core/partition", "core/log", "core/records", "core/controller", "core/vfs", "core/config"},
	"core/config":      {"core/config"},
	"core/controller":  {"core/controller", "core/vfs"},
	"core/log":         {"core/log", "core/records", "core/vfs", "iouring"},
	"core/vfs":         {"core/vfs"},
	"core/records":     {"core/records"},
	"iouring":          {"iouring"},
	"results":          {"results"},
	"core/sim":         {"core/"},
	"internal/simflag": {},
	"profiles":         {"profiles"},
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
// (for example core importing netfetch, or results importing core).
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
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
			if dep == "internal/simflag" && !slices.Contains(p.Imports, imp) {
				continue // test-only, everywhere (TestSimflagEverywhere)
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

// TestSimflagEverywhere: every package with tests registers the simulator's flags, or
// `go test ./... -run TestSimulation -sim.seed=N` fails in the packages that lack them.
func TestSimflagEverywhere(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{len .TestGoFiles}} {{len .XTestGoFiles}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[1] == "0" && f[2] == "0") {
			continue
		}
		if !slices.Contains(f[3:], module+"/internal/simflag") {
			t.Errorf("%s has tests but does not import internal/simflag (add a simflag_test.go)", f[0])
		}
	}
}
