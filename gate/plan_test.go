package gate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	alt := Schedule(3, OrderAlternate, 7)
	want := []Step{{1, Base}, {1, New}, {2, Base}, {2, New}, {3, Base}, {3, New}}
	if !slices.Equal(alt, want) {
		t.Fatalf("alternate = %v, want %v", alt, want)
	}
	// Random: every round holds both sides once; the order depends on the seed only.
	r1, r2 := Schedule(40, OrderRandom, 42), Schedule(40, OrderRandom, 42)
	if !slices.Equal(r1, r2) {
		t.Fatal("random schedule differs for the same seed")
	}
	newFirst := 0
	for i := 0; i < len(r1); i += 2 {
		if r1[i].Round != i/2+1 || r1[i+1].Round != i/2+1 || r1[i].Side == r1[i+1].Side {
			t.Fatalf("round %d is %v %v", i/2+1, r1[i], r1[i+1])
		}
		if r1[i].Side == New {
			newFirst++
		}
	}
	if newFirst != 20 {
		t.Fatalf("random order put new first in %d of 40 rounds, want 20 (balanced)", newFirst)
	}
	// An odd count: the sides' first places differ by one at most, over many seeds.
	for seed := uint64(1); seed <= 200; seed++ {
		s := Schedule(7, OrderRandom, seed)
		first := 0
		for i := 0; i < len(s); i += 2 {
			if s[i].Side == New {
				first++
			}
		}
		if first != 3 && first != 4 {
			t.Fatalf("seed %d: new first in %d of 7 rounds, want 3 or 4", seed, first)
		}
	}
	if slices.Equal(r1, Schedule(40, OrderRandom, 43)) {
		t.Fatal("seeds 42 and 43 gave the same order")
	}
}

func TestParseOrder(t *testing.T) {
	for in, want := range map[string]Order{"alternate": OrderAlternate, "ABAB": OrderAlternate, "random": OrderRandom, "rmit": OrderRandom} {
		if got, err := ParseOrder(in); err != nil || got != want {
			t.Errorf("ParseOrder(%q) = %q, %v", in, got, err)
		}
	}
	_, err := ParseOrder("sideways")
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "allowed alternate (A B A B) or random (RMIT)") {
		t.Fatalf("ParseOrder(sideways) = %v", err)
	}
}

func TestRunSpecArgs(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(spec, []byte("name: w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(".", spec)
	if err != nil {
		rel = spec
	}
	got := RunSpec{Workload: rel, Target: "embedded", Duration: 3 * time.Second, Warmup: -1, Sets: []string{"rate=400", "acks=1"}}.Args("out/new")
	want := []string{"run", "-w", spec, "--quiet", "--out", "out/new", "--target", "embedded", "--duration", "3s", "--set", "rate=400", "--set", "acks=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("args = %q\nwant %q", got, want)
	}
	got = RunSpec{Workload: "gate", Warmup: 0}.Args("o")
	if want := []string{"run", "-w", "gate", "--quiet", "--out", "o", "--warmup", "0s"}; !slices.Equal(got, want) {
		t.Fatalf("args = %q, want %q", got, want)
	}
}

func TestPlanCheck(t *testing.T) {
	for _, tc := range []struct {
		p    Plan
		want string // "" = valid
	}{
		{Plan{Binary: "x", Rounds: 5}, ""},
		{Plan{Revision: "HEAD", SetBase: true, Rounds: 5}, ""},
		{Plan{WriteBaseline: "d", Rounds: 5}, ""},
		{Plan{Baseline: "d", Binary: "x", Rounds: 5}, "alternatives"},
		{Plan{Rounds: 5}, "nothing to do"},
		{Plan{Baseline: "d", SetBase: true, Rounds: 5}, "--set-base needs an interleaved mode"},
		{Plan{Binary: "x", Rounds: 0}, "--repeat 0"},
	} {
		err := tc.p.Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err %v, want %q", tc.p, err, tc.want)
		}
	}
	if err := CheckRuns(3, 3, 0.05); err == nil || !strings.Contains(err.Error(), "use --repeat 4 or more") {
		t.Errorf("3+3 at 0.05: %v", err)
	}
	if err := CheckRuns(6, 6, 0.01); err != nil {
		t.Errorf("6+6 at 0.01: %v", err)
	}
}

func TestMakeDir(t *testing.T) {
	out := t.TempDir()
	a, err := MakeDir(out, "gate")
	if err != nil {
		t.Fatal(err)
	}
	b, err := MakeDir(out, "gate")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.Contains(filepath.Base(a), "-gate-gate") {
		t.Fatalf("dirs %s, %s", a, b)
	}
}

func TestHideSecrets(t *testing.T) {
	got := strings.Join(hideSecrets([]string{"run", "--set", "target.sasl.password=pw1", "--set", "rate=5", "--set",
		"target.sasl.jaas.config=x required password=\"pw2\";", "--command-config", "/c.properties"}), " ")
	if strings.Contains(got, "pw1") || strings.Contains(got, "pw2") || !strings.Contains(got, "rate=5") || !strings.Contains(got, "target.sasl.password=[hidden]") {
		t.Fatalf("hideSecrets: %s", got)
	}
}
