package gate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
)

// TestInterleave runs this test binary as both sides' "isrbench run" and checks that the runs
// happen in the schedule's order, land in base/ and new/, and load back.
func TestInterleave(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeRunEnv, "1")
	for _, order := range []Order{OrderAlternate, OrderRandom} {
		t.Run(string(order), func(t *testing.T) {
			dir := t.TempDir()
			logf := filepath.Join(dir, "order.log")
			t.Setenv(fakeLogEnv, logf)
			var progress bytes.Buffer
			base, nw, err := Interleave(context.Background(), Interleaved{Dir: dir, Rounds: 4, Order: order, Seed: 99,
				Base: Command{Bin: self, Spec: RunSpec{Workload: "gate", Warmup: -1, Sets: []string{"side=base", "p50=100", "cpu=300"}}},
				New:  Command{Bin: self, Spec: RunSpec{Workload: "gate", Warmup: -1, Sets: []string{"side=new", "p50=120", "cpu=330"}}},
				Log:  &progress})
			if err != nil {
				t.Fatal(err)
			}
			if len(base) != 4 || len(nw) != 4 || base[0].Config["side"] != "base" || nw[3].Cost.CPUUsPerRecord != 330 {
				t.Fatalf("loaded base %d, new %d results", len(base), len(nw))
			}
			got, err := os.ReadFile(logf)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, st := range Schedule(4, order, 99) {
				want = append(want, st.Side)
			}
			if strings.Join(strings.Fields(string(got)), " ") != strings.Join(want, " ") {
				t.Fatalf("runs in order %q, want %q", strings.Fields(string(got)), want)
			}
			if !strings.Contains(progress.String(), "gate: run 4/4 new (") {
				t.Fatalf("progress lines:\n%s", progress.String())
			}
			if order == OrderRandom && !strings.Contains(progress.String(), "--seed 99") {
				t.Fatalf("the random order's seed is not logged:\n%s", progress.String())
			}
		})
	}
}

func TestInterleaveFailures(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeRunEnv, "1")
	dir := t.TempDir()
	ok := Command{Bin: self, Spec: RunSpec{Workload: "gate", Warmup: -1, Sets: []string{"p50=1"}}}
	bad := Command{Bin: self, Spec: RunSpec{Workload: "gate", Warmup: -1, Sets: []string{"fail=1"}}}
	_, _, err = Interleave(context.Background(), Interleaved{Dir: dir, Rounds: 2, Base: ok, New: bad})
	if err == nil || !strings.Contains(err.Error(), "gate: new run 1/2 failed") || !strings.Contains(err.Error(), "the run failed on purpose") {
		t.Fatalf("failing new side: %v", err)
	}
	var ie *InputError
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{plain, dir, filepath.Join(dir, "missing")} {
		_, _, err := Interleave(context.Background(), Interleaved{Dir: dir, Rounds: 1, Base: Command{Bin: bin}, New: ok})
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "--binary") {
			t.Errorf("--binary %s: %v, want an InputError", bin, err)
		}
	}
	if _, _, err := Interleave(context.Background(), Interleaved{Dir: dir, Rounds: 1, Base: Command{Revision: "no-such-revision-7f3e"}, New: ok}); !errors.As(err, &ie) {
		t.Errorf("--against no-such-revision: %v, want an InputError", err)
	}
}

func TestInProcess(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	rs, err := InProcess(context.Background(), dir, 3, func(ctx context.Context, out, id string) (*results.Result, error) {
		if out != filepath.Join(dir, New) {
			t.Errorf("out dir %s", out)
		}
		ids = append(ids, id)
		return result(100, 300), nil
	}, nil)
	if err != nil || len(rs) != 3 || strings.Join(ids, ",") != "r1,r2,r3" {
		t.Fatalf("InProcess: %d results, ids %v, %v", len(rs), ids, err)
	}
	_, err = InProcess(context.Background(), dir, 3, func(ctx context.Context, out, id string) (*results.Result, error) {
		return nil, errors.New("boom")
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "run 1/3 failed: boom") {
		t.Fatalf("failing run: %v", err)
	}
}
