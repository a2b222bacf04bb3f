package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results/report"
)

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	a, b, empty := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "empty")
	writeReps(t, a, 4, 50000, 200)
	writeReps(t, b, 4, 30000, 280)
	os.MkdirAll(empty, 0o755)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema": 7}`), 0o644)
	cmp := filepath.Join(dir, "cmp.html")

	tests := []struct {
		name   string
		args   []string
		code   int
		page   string // the page written
		stderr []string
	}{
		{"one run", []string{filepath.Join(a, "rep-0")}, 0, filepath.Join(a, "rep-0", report.FileName), nil},
		{"result.json", []string{filepath.Join(a, "rep-1", "result.json"), "--title", "mine"}, 0, filepath.Join(a, "rep-1", report.FileName), nil},
		{"repetitions", []string{a}, 0, filepath.Join(a, report.FileName), nil},
		{"two sets", []string{a, b, "-o", cmp}, 0, cmp, nil},
		{"two sets without -o", []string{a, b}, 2, "", []string{"-o FILE"}},
		{"none", nil, 2, "", []string{"want at least one"}},
		{"missing", []string{filepath.Join(dir, "nope")}, 2, "", []string{"nope"}},
		{"no results", []string{empty}, 2, "", []string{"no result.json"}},
		{"bad json", []string{bad}, 2, "", []string{"bad.json", `"schema"`}},
		{"bad flag", []string{"--nope", a}, 2, "", []string{"nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"report"}, tt.args...), &out, &errb)
			if code := exitCode(err, &errb); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			if tt.page == "" {
				return
			}
			if !strings.Contains(out.String(), tt.page) {
				t.Errorf("stdout does not name %s:\n%s", tt.page, out.String())
			}
			b, err := os.ReadFile(tt.page)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := report.ExtractData(b); err != nil || !bytes.Contains(b, []byte(`<body data-kind="`)) {
				t.Errorf("%s is not a report page: %v", tt.page, err)
			}
		})
	}
}
