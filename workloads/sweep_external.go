package workloads

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// sweepOnTarget runs sweep; on a kafka:// target it first refuses the axes the cluster cannot
// be swept over (CheckSweepOnTarget), then gives every run one ConfigSession, restored after
// the last point, also when the sweep fails or is cancelled.
func sweepOnTarget(ctx context.Context, base *spec.Spec, axes []spec.Axis, repeat int, o Options) (*SweepOutcome, error) {
	hosts, err := spec.CheckTarget(o.Target, base)
	if err != nil || hosts == nil || o.session != nil {
		return sweep(ctx, base, axes, repeat, o) // a bad target fails each run, as it records
	}
	if len(axes) == 0 {
		axes = base.SweepAxes()
	}
	if err := target.CheckSweepOnTarget(o.Target, axes, o.Assume); err != nil {
		return nil, err
	}
	// A refused security setting ends the sweep now (every point would fail alike); an
	// unreachable cluster fails each point, recorded as such.
	sec, err := target.ClientSecurity(ctx, o.Target, hosts, base)
	if errors.Is(err, target.ErrTargetConnect) {
		return nil, err
	}
	cl, err := kgo.NewClient(target.ClientOpts(hosts, sec)...)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", o.Target, err)
	}
	defer cl.Close()
	stderr := o.Stderr
	if stderr == nil || o.Quiet {
		stderr = io.Discard
	}
	o.session = target.NewConfigSession(kadm.NewClient(cl), o.Assume, func(format string, args ...any) {
		fmt.Fprintf(stderr, format+"\n", args...)
	})
	out, err := sweep(ctx, base, axes, repeat, o)
	if rerr := o.session.Restore(ctx); rerr != nil {
		fmt.Fprintf(stderr, "sweep: %v\n", rerr)
		err = errors.Join(err, rerr)
	}
	return out, err
}
