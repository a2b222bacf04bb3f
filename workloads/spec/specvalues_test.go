package spec

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/internal/simflag"
)

// TestSpecValuesPinned: every spec under workloads/specs (the embedded ones, compose/ and
// serve/) parses to the values recorded in testdata/spec_values.json: every effective
// setting as result.json's config records it, and the keys it gives explicitly. A change of the spec language that changes
// what a spec means fails here; `go test -run TestSpecValuesPinned -rewrite` records an
// intended change.
func TestSpecValuesPinned(t *testing.T) {
	root := filepath.Join("..", "specs")
	got := map[string]map[string]any{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		s, err := Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		c := s.Config()
		c["(given)"] = s.GivenKeys() // on a kafka:// target only these broker settings are applied
		got[filepath.ToSlash(rel)] = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 20 {
		t.Fatalf("found %d specs under %s", len(got), root)
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	golden := filepath.Join("testdata", "spec_values.json")
	if *simflag.Rewrite {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		var w map[string]map[string]any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		var g map[string]map[string]any
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		for name, wc := range w {
			gc, ok := g[name]
			if !ok {
				t.Errorf("%s: no longer found", name)
				continue
			}
			for k, wv := range wc {
				if gv, ok := gc[k]; !ok || !jsonEqual(gv, wv) {
					t.Errorf("%s: %s = %v, recorded %v", name, k, gv, wv)
				}
			}
			for k, gv := range gc {
				if _, ok := wc[k]; !ok {
					t.Errorf("%s: %s = %v, not recorded", name, k, gv)
				}
			}
		}
		for name := range g {
			if _, ok := w[name]; !ok {
				t.Errorf("%s: not recorded (rewrite with -rewrite)", name)
			}
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestBrokerBlockErrorsNameKeyAndFile: a broker: block is checked by the registry; an
// unknown key, a wrong type and a value out of range are errors naming the file, the line,
// the key and the allowed values.
func TestBrokerBlockErrorsNameKeyAndFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown", "broker:\n  replica.fetch.nope: 1\n", `line 2: unknown key "broker.replica.fetch.nope"`},
		{"type", "broker:\n  num.replica.fetchers: many\n", `line 2: num.replica.fetchers: "many" is not an integer; allowed 1..64`},
		{"range", "broker:\n  num.replica.fetchers: 65\n", "line 2: num.replica.fetchers: 65 is out of range; allowed 1..64"},
		{"bool", "broker:\n  isrbench.zero.copy: maybe\n", `line 2: isrbench.zero.copy: "maybe" is not true or false; allowed true|false`},
		{"mode", "broker:\n  isrbench.io: mmap\n", `line 2: isrbench.io: "mmap" is not allowed; allowed pwritev|uring|write`},
		{"duration", "broker:\n  isrbench.produce.delay: 2h\n", "line 2: isrbench.produce.delay: 2h0m0s is out of range; allowed 0s..1m0s"},
		{"topic-level name", "broker:\n  flush.ms: -5\n", "line 2: flush.ms: log.flush.interval.ms: -5 is out of range"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "workload "+p+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want the file and %q", tc.name, err, tc.want)
		}
	}
}
