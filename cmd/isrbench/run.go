package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/workloads"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

func init() {
	register("run", "run one workload against the embedded cluster or a kafka:// target", cmdRun)
}

// specFlags are the flags shared by run and sweep.
type specFlags struct {
	workload string
	sets     multiFlag
	target   string
	duration optDuration
	warmup   optDuration
	out      string
	assume   multiFlag
	// commandConfig is --command-config: Kafka client properties for a kafka:// target.
	commandConfig string
	// assumed is --assume parsed (canonical key -> value), set by load.
	assumed map[string]string
	stderr  io.Writer // notes of load
}

func (f *specFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.workload, "w", "default", "workload spec: an embedded name ("+strings.Join(spec.SpecNames(), ", ")+") or a YAML file")
	fs.Var(&f.sets, "set", "override a setting, key=value (repeatable; keys below)")
	fs.StringVar(&f.target, "target", "", "embedded | kfake | kafka://host:port[,host:port] (default: the spec's target, embedded)")
	fs.Var(&f.duration, "duration", "measurement duration, as --set duration=D (default: the spec's duration)")
	fs.Var(&f.warmup, "warmup", "warm-up before measurement, as --set warmup=D (default: the spec's warmup)")
	fs.StringVar(&f.out, "out", "results/runs", "parent directory of the run directories")
	fs.Var(&f.assume, "assume", "a broker setting already in effect on the kafka:// cluster, key=value (repeatable): not changed, not required to be reported")
	fs.StringVar(&f.commandConfig, "command-config", "", commandConfigHelp+"; for a kafka:// target, over the spec's target block")
	f.stderr = fs.Output()
}

// load reads the spec, applies --duration, --warmup and --set (in that order, all checked
// alike: --duration 0s is as wrong as --set duration=0s) and checks --target against it;
// errors are usage errors.
func (f *specFlags) load() (*spec.Spec, error) {
	s, err := spec.Load(f.workload)
	if err != nil {
		return nil, usagef("%v", err)
	}
	for _, o := range []struct {
		key string
		d   optDuration
	}{{"duration", f.duration}, {"warmup", f.warmup}} {
		if !o.d.set {
			continue
		}
		for _, kv := range f.sets {
			if k, _, _ := strings.Cut(kv, "="); spec.Lookup(strings.TrimSpace(k)) != nil && spec.Lookup(strings.TrimSpace(k)).Key == o.key {
				return nil, usagef("--%s %s and --set %s both set %s; give one", o.key, o.d.text, kv, o.key)
			}
		}
		if err := s.Set(o.key, o.d.text); err != nil {
			return nil, usagef("--%s: %v", o.key, err)
		}
	}
	if err := s.ApplySets(f.sets); err != nil {
		return nil, usagef("%v", err)
	}
	if f.target != "" {
		for _, kv := range f.sets {
			if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == "target" {
				return nil, usagef("--target %s and --set %s both set the target; give one", f.target, kv)
			}
		}
		if err := s.Set("target", f.target); err != nil {
			return nil, usagef("--target: %v", err)
		}
	}
	if err := mergeCommandConfig(s, f.commandConfig, f.stderr); err != nil {
		return nil, err
	}
	if err := s.CheckClientTarget(s.Target); err != nil {
		return nil, usagef("%v", err)
	}
	hosts, err := spec.CheckTarget(s.Target, s)
	if err != nil {
		return nil, usagef("--target: %v", err)
	}
	if len(f.assume) > 0 && hosts == nil {
		return nil, usagef("--assume applies to a kafka:// target (the embedded cluster is built from the spec; use --set)")
	}
	if f.assumed, err = target.ParseAssume(f.assume); err != nil {
		return nil, usagef("%v", err)
	}
	if err := s.ApplyAssume(f.assumed); err != nil {
		return nil, usagef("%v", err)
	}
	return s, nil
}

// runError maps a run's error to the exit status: a lost acknowledged record is a failure
// (1), a setting the target cannot be given is bad input (2).
func runError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, spec.ErrTargetSetting), errors.Is(err, target.ErrTargetConnect):
		return usagef("%v", err)
	case errors.Is(err, workloads.ErrDurability):
		return &exitError{code: 1, err: err}
	}
	return err
}

// durationArgs are --duration and --warmup as given (for a subprocess run), or nothing.
func (f *specFlags) durationArgs() []string {
	var args []string
	if f.duration.set {
		args = append(args, "--duration", f.duration.text)
	}
	if f.warmup.set {
		args = append(args, "--warmup", f.warmup.text)
	}
	return args
}

func withKeyHelp(fs *flag.FlagSet, usage string, stderr io.Writer) {
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: isrbench %s\n", usage)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nsettings for --set/--vary (canonical key, then other accepted names):\n%s", spec.KeyHelp())
	}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "run [-w SPEC] [--set key=value ...] [--target embedded|kafka://h:p,...] [--command-config FILE] [--assume key=value ...] [--worker K/N --start-at TIME] [--duration D] [--warmup D] [--out DIR] [--profile kinds] [--quiet]"
	fs := newFlags("run", usage, stderr)
	var sf specFlags
	sf.register(fs)
	profile := fs.String("profile", "", "pprof kinds captured during measurement: cpu,heap,allocs,mutex,block,goroutine; trace writes Go's execution trace (go tool trace)")
	quiet := fs.Bool("quiet", false, "no summary table or progress line")
	worker := fs.String("worker", "", "run the K-th of N workers of the spec, K/N (with --start-at; merge their run dirs with isrbench merge)")
	startAt := fs.String("start-at", "", "with --worker: when every worker starts its load, RFC 3339 (e.g. 2026-05-01T12:00:00Z)")
	withKeyHelp(fs, usage, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("run: unexpected arguments %q", fs.Args())
	}
	s, err := sf.load()
	if err != nil {
		return err
	}
	kinds, err := profileKinds(*profile)
	if err != nil {
		return err
	}
	w, err := load.ParseWorker(*worker, *startAt)
	if err != nil {
		return usagef("run: %v", err)
	}
	if err := w.CheckSpec(s, sf.target); err != nil {
		return usagef("run: %v", err)
	}
	_, err = workloads.Run(ctx, s, workloads.Options{Target: sf.target, OutDir: sf.out, Profile: kinds,
		Quiet: *quiet, Stdout: stdout, Stderr: stderr, Assume: sf.assumed, Worker: w})
	return runError(err)
}

// profileKinds parses --profile (empty: no profiles); a bad kind is a usage error.
func profileKinds(flag string) ([]string, error) {
	if flag == "" {
		return nil, nil
	}
	kinds, err := profiles.ParseKinds(flag)
	if err != nil {
		return nil, usagef("--profile: %v", err)
	}
	return kinds, nil
}
