package workloads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// SweepRun is one run of a sweep in sweep.json.
type SweepRun struct {
	Point    int               `json:"point"`    // index of the point (0-based)
	Label    string            `json:"label"`    // "key=value,key=value"
	Settings map[string]string `json:"settings"` // the point's settings
	Repeat   int               `json:"repeat"`   // 1-based repetition
	Dir      string            `json:"dir"`      // run directory; "" when the run failed before it measured anything
	Result   string            `json:"result,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// SweepIndex is sweep.json: the sweep's axes and one entry per run, in run order.
type SweepIndex struct {
	Name      string      `json:"name"`
	StartedAt time.Time   `json:"started_at"`
	Target    string      `json:"target"`
	Axes      []spec.Axis `json:"axes"`
	Repeat    int         `json:"repeat"`
	Runs      []SweepRun  `json:"runs"`
}

// SweepOutcome is what Sweep returns: the index, the sweep directory and the results of the
// runs that produced one (in run order).
type SweepOutcome struct {
	Dir     string
	Index   SweepIndex
	Results []*results.Result
	Failed  int
}

// Sweep runs every point of the cartesian product of axes (the spec's own sweep section when
// axes is empty), repeat times, interleaved (A B C A B C), each in its own directory under
// <OutDir>/<time>-sweep-<name>/. A failing run is recorded and the sweep goes on; the error
// is non-nil when any run failed (the outcome is still complete). sweep.json is rewritten
// after every run. On a kafka:// target the settings of every point are applied by one
// ConfigSession, restored after the last point (see sweepOnTarget).
func Sweep(ctx context.Context, base *spec.Spec, axes []spec.Axis, repeat int, o Options) (*SweepOutcome, error) {
	return sweepOnTarget(ctx, base, axes, repeat, o)
}

func sweep(ctx context.Context, base *spec.Spec, axes []spec.Axis, repeat int, o Options) (*SweepOutcome, error) {
	if repeat < 1 {
		return nil, fmt.Errorf("repeat %d; allowed >= 1", repeat)
	}
	if len(axes) == 0 {
		axes = base.SweepAxes()
	}
	points := spec.Points(axes)
	// Validate every point before running any.
	for _, pt := range points {
		s := base.Clone()
		if err := pt.Apply(s); err != nil {
			return nil, fmt.Errorf("sweep point %s: %w", pt.Label(), err)
		}
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join("results", "runs")
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard // as in Run: the per-point lines below are printed unless Quiet
	}
	started := time.Now()
	dir, err := makeRunDir(o.OutDir, started.UTC().Format("20060102-150405")+"-sweep-"+base.Name)
	if err != nil {
		return nil, err
	}
	target := o.Target
	if target == "" {
		target = base.TargetName()
	}
	out := &SweepOutcome{Dir: dir, Index: SweepIndex{Name: base.Name, StartedAt: started.UTC(), Target: target, Axes: axes, Repeat: repeat}}
	if out.Index.Axes == nil {
		out.Index.Axes = []spec.Axis{}
	}
	for rep := 1; rep <= repeat; rep++ {
		for i, pt := range points {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			s := base.Clone()
			_ = pt.Apply(s) // validated above
			ro := o
			ro.OutDir = dir
			ro.ID = fmt.Sprintf("p%02d-%s-r%d", i, safeLabel(pt.Label()), rep)
			if !o.Quiet {
				fmt.Fprintf(o.Stderr, "sweep: point %d/%d %s, repeat %d/%d\n", i+1, len(points), orNone(pt.Label()), rep, repeat)
			}
			ro.Quiet = true
			sr := SweepRun{Point: i, Label: pt.Label(), Settings: map[string]string{}, Repeat: rep}
			for _, kv := range pt {
				sr.Settings[kv.Key] = kv.Value
			}
			res, err := Run(ctx, s, ro)
			if res != nil {
				sr.Result = filepath.Join(dir, res.ID, "result.json")
				sr.Dir = filepath.Join(dir, res.ID)
				out.Results = append(out.Results, res)
			}
			if err != nil {
				out.Failed++
				sr.Error = err.Error()
				fmt.Fprintf(o.Stderr, "sweep: point %s repeat %d failed: %v\n", orNone(pt.Label()), rep, err)
			}
			out.Index.Runs = append(out.Index.Runs, sr)
			if err := writeIndex(filepath.Join(dir, "sweep.json"), &out.Index); err != nil {
				return out, err
			}
		}
	}
	rerr := writeSweepReport(dir, out)
	if out.Failed > 0 {
		return out, errors.Join(fmt.Errorf("%d of %d sweep runs failed", out.Failed, len(out.Index.Runs)), rerr)
	}
	return out, rerr
}

func orNone(l string) string {
	if l == "" {
		return "(spec as is)"
	}
	return l
}

func safeLabel(l string) string {
	if l == "" {
		return "base"
	}
	r := strings.NewReplacer("=", "-", ",", "_", "/", "_", " ", "_")
	return r.Replace(l)
}

func writeIndex(path string, idx *SweepIndex) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return errors.Join(os.Rename(tmp, path))
}
