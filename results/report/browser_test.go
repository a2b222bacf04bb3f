package report

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browserDir is the Node project of the browser check (playwright-core driving Chromium).
const browserDir = "testdata/browser"

// TestBrowser loads the pages of a run, a sweep, a gate comparison and an hour-long run in
// headless Chromium (testdata/browser/check.mjs): no console errors, no request leaving the
// page, every chart drawn with its series, data tables, hover, print. Screenshots go to the
// test's temporary directory, or to $ISRBENCH_REPORT_SHOTS when set (kept).
//
// It needs node, Chromium ($CHROMIUM or /usr/bin/chromium) and `npm ci` in testdata/browser;
// without them it fails when ISRBENCH_REQUIRE_BROWSER is set (CI) and is skipped otherwise.
func TestBrowser(t *testing.T) {
	missing := func(what string) {
		t.Helper()
		if os.Getenv("ISRBENCH_REQUIRE_BROWSER") != "" {
			t.Fatalf("ISRBENCH_REQUIRE_BROWSER is set but %s (.ci/run installs Debian's chromium and runs npm ci in %s)", what, browserDir)
		}
		t.Skipf("browser check skipped: %s (set ISRBENCH_REQUIRE_BROWSER=1 to make this a failure)", what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("no Chromium at " + chromium)
	}
	if _, err := os.Stat(filepath.Join(browserDir, "node_modules", "playwright-core")); err != nil {
		missing("playwright-core is not installed (npm ci --prefix " + browserDir + ")")
	}

	tmp := t.TempDir()
	shots := os.Getenv("ISRBENCH_REPORT_SHOTS")
	if shots == "" {
		shots = filepath.Join(tmp, "shots")
	}
	opts := Options{Defaults: testDefaults}
	pages := []struct {
		name  string
		build func() (*Data, error)
	}{
		{"run", func() (*Data, error) { return BuildRun(runFixture, opts) }},
		{"sweep", func() (*Data, error) { return BuildSweep(sweepFixture, opts) }},
		{"gate", func() (*Data, error) { return BuildGate(gateFixture, opts) }},
		{"long-run", func() (*Data, error) { return BuildRun(longRun(t, tmp), opts) }},
	}
	args := []string{"check.mjs", "--out", shots, "--chromium", chromium}
	want := map[string]*Data{}
	for _, p := range pages {
		d, err := p.build()
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		path := filepath.Join(tmp, p.name+".html")
		if err := Write(path, d); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(path)
		t.Logf("%s page: %d bytes, %d charts", p.name, st.Size(), len(d.Charts))
		want[p.name] = d
		args = append(args, p.name+"="+path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = browserDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var got struct {
		OK    bool `json:"ok"`
		Pages []struct {
			Name   string   `json:"name"`
			Kind   string   `json:"kind"`
			Errors []string `json:"errors"`
			Shots  []string `json:"shots"`
			Charts []struct {
				ID     string   `json:"id"`
				Series []string `json:"series"`
			} `json:"charts"`
		} `json:"pages"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("check.mjs: %v (%v)\nstdout: %s\nstderr: %s", runErr, err, stdout.String(), stderr.String())
	}
	if len(got.Pages) != len(pages) {
		t.Fatalf("check.mjs checked %d pages, want %d", len(got.Pages), len(pages))
	}
	for _, p := range got.Pages {
		for _, e := range p.Errors {
			t.Errorf("%s: %s", p.Name, e)
		}
		d := want[p.Name]
		if p.Kind != d.Kind || len(p.Charts) != len(d.Charts) {
			t.Errorf("%s: kind %s with %d charts, want %s with %d", p.Name, p.Kind, len(p.Charts), d.Kind, len(d.Charts))
			continue
		}
		for i, c := range p.Charts {
			var names []string
			for _, s := range d.Charts[i].Series {
				if len(s.X) > 0 {
					names = append(names, s.Name)
				}
			}
			if strings.Join(c.Series, "|") != strings.Join(names, "|") || len(names) == 0 {
				t.Errorf("%s: chart %s drew series %q, want %q", p.Name, c.ID, c.Series, names)
			}
		}
		t.Logf("%s: screenshots %s", p.Name, strings.Join(p.Shots, " "))
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("check.mjs: %v\nstderr: %s", runErr, stderr.String())
	}
}
