package workloads

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/isrbench/isrbench/internal/sched"
	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// RunID returns the default run id: UTC time, spec name and a short hash of the effective config.
func RunID(s *spec.Spec, now time.Time) string {
	b, _ := json.Marshal(s.Config()) // map keys are sorted: stable
	sum := sha256.Sum256(b)
	return now.UTC().Format("20060102-150405") + "-" + s.Name + "-" + hex.EncodeToString(sum[:3])
}

// Run runs one workload: start (or connect to) the target, create the topic, wait for full
// ISRs, run warm-up then measurement, drain, check durability, write the outputs into
// <OutDir>/<id>/ and return the result. The embedded cluster and its temp data dir are removed
// before Run returns, also on error and cancellation. A run whose clean elections lost
// acknowledged records returns its result and an error wrapping ErrDurability.
func Run(ctx context.Context, s *spec.Spec, o Options) (res *results.Result, err error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	o.lockWriters()
	if o.OutDir == "" {
		o.OutDir = filepath.Join("results", "runs")
	}
	if o.Target == "" {
		o.Target = s.TargetName()
	}
	if o.TimelineInterval <= 0 {
		o.TimelineInterval = time.Second
		if s.Duration < 10*time.Second {
			o.TimelineInterval = sampleInterval(100*time.Millisecond, s.Topic.Partitions, time.Second)
		}
	}
	if len(o.Profile) > 0 {
		if err := profiles.ValidateKinds(o.Profile); err != nil {
			return nil, err
		}
	}
	if err := o.Worker.CheckSpec(s, o.Target); err != nil {
		return nil, err
	}
	if n := spec.EmbeddedOnlyFaults(s); n > 0 && o.Target != "embedded" {
		return nil, fmt.Errorf("spec %s has %d faults of kinds that need the embedded target (%s), not %s; use kind exec", s.Name, n, strings.Join(spec.EmbeddedFaultKinds(), ", "), o.Target)
	}
	// The process's threads, the target's (an embedded cluster, kfake) and the clients' alike,
	// run under the spec's scheduling policy; threads started later inherit it. A kernel or
	// sandbox that refuses it does not stop the run: the run says so, and env.sched records the
	// policy the threads kept.
	var schedRefused string
	if _, err := applySched(sched.Policy(s.SchedPolicy)); err != nil {
		schedRefused = fmt.Sprintf("sched.policy=%s refused, the threads run as they were: %v", s.SchedPolicy, err)
		if !o.Quiet {
			fmt.Fprintf(o.Stderr, "isrbench: %s\n", schedRefused)
		}
	}
	startedAt := time.Now()
	id := o.ID
	if id == "" {
		id = RunID(s, startedAt)
	}
	dir, err := makeRunDir(o.OutDir, id)
	if err != nil {
		return nil, err
	}
	in := &runInput{spec: s, opts: o, dir: dir, id: filepath.Base(dir), startedAt: startedAt, schedRefused: schedRefused}
	func() {
		var ls loops
		// close's error: a kafka:// target's settings that could not be restored.
		defer func() { err = errors.Join(err, ls.close()) }()
		res, err = runPhases(ctx, in, &ls)
	}()
	if res == nil {
		// A run that ended before it had anything to write (the target did not open, the
		// topic could not be created, ctrl-C during setup) leaves no empty run dir behind;
		// os.Remove keeps a dir that holds something (a partial timeline, profiles).
		os.Remove(dir)
	}
	return res, err
}

// applySched is sched.Apply; a test puts a refusing kernel in its place.
var applySched = sched.Apply

func makeRunDir(parent, id string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("output dir: %w", err)
	}
	for i := 1; ; i++ {
		d := filepath.Join(parent, id)
		if i > 1 {
			d = fmt.Sprintf("%s-%d", d, i)
		}
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !os.IsExist(err) || i > 100 {
			return "", fmt.Errorf("output dir: %w", err)
		}
	}
}

// runPhases runs the phases of a run, each a function of the values the earlier ones
// returned (see the comment at the top of runner_values.go). Whatever a phase starts that must
// end with the run is registered in ls, which Run closes on every path.
func runPhases(ctx context.Context, in *runInput, ls *loops) (*results.Result, error) {
	p, err := setup(ctx, in, ls)
	if err != nil {
		return nil, err
	}
	m, err := measure(ctx, in, p, ls)
	if err != nil {
		return nil, err
	}
	st, err := settle(ctx, in, p, m)
	if err != nil {
		return nil, err
	}
	v, err := verify(ctx, in, p, st)
	if err != nil {
		return nil, err
	}
	return report(in, p, m, st, v)
}
