package workloads

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// The exec fault: a shell command run at faults[i].at and, optionally, an undo command run at
// at + duration (at the latest at the end of the measurement, also when the run is cancelled),
// for the faults a harness cannot apply from inside its process on a real cluster:
//
//	faults:
//	  - {at: 2s, duration: 5s, kind: exec, target: follower-of:isrbench-0,
//	     command: "docker compose stop kafka-{broker}", undo: "docker compose start kafka-{broker}"}
//
// The target (a broker id, leader-of:/follower-of:TOPIC-PARTITION, leader, follower,
// any-follower) is resolved from the cluster's metadata when the fault starts; in both
// commands {broker} is its broker id, {host} and {port} its advertised address, each replaced
// by a shell-quoted word (write them outside quotes: "kafka-{broker}" would keep the quotes),
// also given as ISRBENCH_BROKER, ISRBENCH_HOST and ISRBENCH_PORT. The undo
// runs against the broker the command ran against, even if the role moved meanwhile. Each
// command runs through `sh -c` in its own process group, in the directory isrbench was
// started from, and is killed with its group after faults[i].timeout (default 60s); its
// standard output and error are saved in the run directory as faults/<i>-command.out and
// faults/<i>-undo.out, and its exit status is in result.json faults[i].exec / .undo. A command
// that cannot start, fails or times out does not stop the run: the fault is recorded with its
// error and the run goes on (the timeline shows what the cluster did).

// validHost accepts what a broker may advertise as its host: a DNS name or an IP address.
// Anything else (a broker's metadata is peer input) is refused before it reaches a shell.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// shellQuote quotes v for sh: 'v' with every ' written as '\”.
func shellQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// expandExec replaces {broker}, {host} and {port} in command by b's (shell-quoted) values.
func expandExec(command string, b target.ExecBroker) string {
	return strings.NewReplacer(
		"{broker}", shellQuote(strconv.Itoa(int(b.ID))),
		"{host}", shellQuote(b.Host),
		"{port}", shellQuote(strconv.Itoa(b.Port)),
	).Replace(command)
}

// runExec runs one command of an exec fault (see the comment at the top of this file) and
// returns what result.json records of it. It returns when the command exited or was killed.
func runExec(command string, b target.ExecBroker, timeout time.Duration, outPath string) *results.ExecRun {
	if timeout <= 0 {
		timeout = spec.DefaultExecTimeout
	}
	run := &results.ExecRun{Command: expandExec(command, b), Output: outPath, ExitCode: -1}
	start := time.Now()
	defer func() { run.DurationS = round3(time.Since(start).Seconds()) }()
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		run.Error = err.Error()
		return run
	}
	out, err := os.Create(outPath)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer out.Close()
	// The command's own context: a cancelled run still lets a started command finish (it
	// may be half-way through stopping a broker) within its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", run.Command)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(),
		"ISRBENCH_BROKER="+strconv.Itoa(int(b.ID)), "ISRBENCH_HOST="+b.Host, "ISRBENCH_PORT="+strconv.Itoa(b.Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		run.ExitCode = 0
	case ctx.Err() != nil:
		run.Error = fmt.Sprintf("killed after the timeout of %s", timeout)
	case errors.As(err, &ee):
		run.ExitCode = ee.ExitCode()
		if run.ExitCode < 0 {
			run.Error = ee.String() // killed by a signal
		} else {
			run.Error = fmt.Sprintf("exit status %d", run.ExitCode)
		}
	default:
		run.Error = err.Error()
	}
	return run
}

// runExecFault runs exec fault i: it resolves the target when the fault starts, runs the
// command, then the undo after the duration (at the latest at measureEnd, at once when ctx
// ends), and records both in result.json faults[i].
func (fr *faultRunner) runExecFault(ctx context.Context, i int, f spec.Fault) {
	log, measureStart, measureEnd := fr.log, fr.measureStart, fr.measureEnd
	applied, rf, ok := fr.startAt(ctx, f, fmt.Sprintf("faults[%d]: exec against %s", i, describeTarget(f)))
	if !ok {
		return
	}
	notef := fr.in.notef
	b, err := fr.resolveExec(ctx, f)
	if err != nil {
		rf.Error = err.Error()
		notef("fault %d exec: %v", i, err)
		log.add(i, rf)
		return
	}
	rf.Target = "broker=" + strconv.Itoa(int(b.ID))
	dir := filepath.Join(fr.in.dir, "faults")
	rf.Exec = runExec(f.Command, b, f.Timeout, filepath.Join(dir, fmt.Sprintf("%d-command.out", i)))
	if rf.Exec.Error != "" {
		rf.Error = "command: " + rf.Exec.Error
		notef("fault %d exec %q: %s (output in %s)", i, rf.Exec.Command, rf.Exec.Error, rf.Exec.Output)
	}
	if f.Undo != "" {
		until := applied.Add(f.Duration)
		if until.After(measureEnd) {
			until = measureEnd
		}
		poll.At(ctx, until) // on cancel: undo at once
		rf.Undo = runExec(f.Undo, b, f.Timeout, filepath.Join(dir, fmt.Sprintf("%d-undo.out", i)))
		rf.EndS = time.Since(measureStart).Seconds()
		if rf.Undo.Error != "" {
			rf.Error = strings.TrimPrefix(rf.Error+"; undo: "+rf.Undo.Error, "; ")
			notef("fault %d undo %q: %s (output in %s)", i, rf.Undo.Command, rf.Undo.Error, rf.Undo.Output)
		}
	}
	log.add(i, rf)
}

// resolveExec resolves an exec fault's target through the target's metadata.
func (fr *faultRunner) resolveExec(ctx context.Context, f spec.Fault) (target.ExecBroker, error) {
	er, s := fr.tgt.parts.Exec, fr.in.spec
	if er == nil {
		return target.ExecBroker{}, fmt.Errorf("target %s cannot resolve exec fault targets", fr.tgt.Name())
	}
	pt, err := spec.ParseFaultTarget("target", f, s.Brokers, s.Topic.Name, s.Topic.Partitions, int(s.Settings.Int("offsets.topic.num.partitions")))
	if err != nil {
		return target.ExecBroker{}, err
	}
	if pt.IsGroups() {
		return target.ExecBroker{}, fmt.Errorf("target %q: two groups of brokers apply to kind partition only", f.Target)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := er.ResolveBroker(rctx, s.Topic.Name, pt.Ref)
	if err != nil {
		return target.ExecBroker{}, err
	}
	if !validHost(b.Host) {
		return target.ExecBroker{}, fmt.Errorf("broker %d advertises host %q, which is not a host name or IP address: not passed to a shell", b.ID, b.Host)
	}
	return b, nil
}
