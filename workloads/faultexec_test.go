package workloads

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

func TestExecFaultSpecErrors(t *testing.T) {
	base := "name: x\nduration: 5s\nfaults:\n  - "
	for _, tc := range []struct{ fault, want string }{
		{"{at: 1s, kind: exec}", "faults[0].command is required for kind exec"},
		{"{at: 1s, kind: exec, command: \"true\", undo: \"true\"}", "0s with an undo command"},
		{"{at: 1s, duration: 2s, kind: exec, command: \"true\"}", "without an undo command: nothing runs at its end"},
		{"{at: 1s, duration: 2s, kind: pause-broker, command: \"true\"}", "command/undo/timeout apply only to kind exec"},
		{"{at: 1s, kind: exec, command: \"true\", latency: 5ms}", "apply only to kind slow-link, not exec"},
		{"{at: 1s, kind: exec, command: \"true\", fence: now}", "fence applies only to kill-broker and crash-broker, not exec"},
		{"{at: 1s, kind: exec, command: \"  \"}", "faults[0].command: empty"},
		{"{at: 1s, kind: exec, command: \"true\", timeout: 0s}", "faults[0].timeout: 0s is out of range"},
		{"{at: 1s, kind: exec, command: \"true\", target: \"follower-of:other-0\"}", `names topic "other"`},
	} {
		if _, err := spec.Parse([]byte(base + tc.fault + "\n")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.fault, err, tc.want)
		}
	}
	// Any broker id: an external cluster's ids need not be 0..brokers-1.
	if _, err := spec.Parse([]byte(base + "{at: 1s, kind: exec, command: \"true\", target: \"7\"}\n")); err != nil {
		t.Errorf("exec on broker 7: %v", err)
	}
	if _, err := spec.CheckTarget("kafka://h:1", mustParse(t, base+"{at: 1s, kind: exec, command: \"true\"}\n")); err != nil {
		t.Errorf("exec fault on a kafka:// target: %v", err)
	}
	if _, err := spec.CheckTarget("kafka://h:1", mustParse(t, base+"{at: 1s, duration: 1s, kind: pause-broker}\n")); err == nil || !strings.Contains(err.Error(), "use kind exec") {
		t.Errorf("pause-broker on a kafka:// target: %v", err)
	}
}

func mustParse(t *testing.T, y string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExecFaultEmbedded: an exec fault's command gets the resolved broker id and address
// (shell-quoted, and in the environment), its output lands in the run dir, its exit status
// and its undo's in result.json; a command past its timeout is killed with its process group.
func TestExecFaultEmbedded(t *testing.T) {
	s := shortSpec(t, "duration=2s", "warmup=200ms", "producers.rate=200", "consumers.count=0")
	s.Faults = []spec.Fault{
		{At: 200 * time.Millisecond, Duration: 800 * time.Millisecond, Kind: "exec", Target: "leader-of:isrbench-1",
			Command: `echo broker {broker} at {host}:{port} env "$ISRBENCH_BROKER" "$ISRBENCH_HOST"`, Undo: "echo undone >&2; exit 3"},
		{At: 300 * time.Millisecond, Kind: "exec", Target: "0", Command: "sleep 30 & wait", Timeout: 300 * time.Millisecond},
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 2 {
		t.Fatalf("faults %+v", res.Faults)
	}
	f := res.Faults[0]
	if f.Exec == nil || f.Exec.ExitCode != 0 || f.Undo == nil || f.Undo.ExitCode != 3 || f.Error != "undo: exit status 3" || f.EndS <= f.AtS {
		t.Fatalf("fault 0 %+v exec %+v undo %+v", f, f.Exec, f.Undo)
	}
	id := strings.TrimPrefix(f.Target, "broker=")
	out, err := os.ReadFile(f.Exec.Output)
	if err != nil || !strings.HasPrefix(string(out), "broker "+id+" at 127.0.0.1:") || !strings.Contains(string(out), "env "+id+" 127.0.0.1") {
		t.Errorf("command output %q (%v), want broker %s's id and address", out, err, id)
	}
	if !strings.Contains(f.Exec.Command, "'"+id+"'") {
		t.Errorf("command as run %q: want the id shell-quoted", f.Exec.Command)
	}
	if b, _ := os.ReadFile(f.Undo.Output); string(b) != "undone\n" {
		t.Errorf("undo output %q", b)
	}
	k := res.Faults[1]
	if k.Exec == nil || k.Exec.ExitCode != -1 || !strings.Contains(k.Exec.Error, "killed after the timeout of 300ms") || k.Exec.DurationS > 10 {
		t.Errorf("timed-out command %+v", k.Exec)
	}
}

func TestShellQuoteAndHosts(t *testing.T) {
	if got := expandExec("ssh {host} stop {broker}", target.ExecBroker{ID: 3, Host: "kafka-3.example", Port: 9092}); got != "ssh 'kafka-3.example' stop '3'" {
		t.Errorf("expandExec: %q", got)
	}
	if got := shellQuote("a'b"); got != `'a'\''b'` {
		t.Errorf("shellQuote: %q", got)
	}
	for h, ok := range map[string]bool{"kafka-0": true, "10.0.0.5": true, "::1": true, "a;rm -rf /": false, "$(id)": false, "": false} {
		if validHost(h) != ok {
			t.Errorf("validHost(%q) = %v", h, !ok)
		}
	}
}
