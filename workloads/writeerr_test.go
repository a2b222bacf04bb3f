package workloads

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// The run's CSV outputs report write errors (here: /dev/full, where every write fails ENOSPC).

type onePartition struct{}

func (onePartition) SamplePartitions(string) ([]target.PartitionSample, error) {
	return []target.PartitionSample{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}, nil
}

// TestPartTimelineWriteError: a partitions.csv that cannot be written is reported in pt.err.
func TestPartTimelineWriteError(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	pt := newPartTimeline(spec.DefaultSpec(), nil, onePartition{}, "/dev/full", time.Now().Add(-time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pt.loop(ctx)
	if pt.err == nil {
		t.Fatal("write to /dev/full: no error reported")
	}
}

type sampleOnly struct{ target.Target }

func (sampleOnly) Sample(context.Context, string) (target.Sample, error) { return target.Sample{}, nil }

// TestTimelineFlushError: a timeline.csv that cannot be written is reported, not dropped.
func TestTimelineFlushError(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	var stderr strings.Builder
	now := time.Now()
	tl, err := newTimeline(spec.DefaultSpec(), sampleOnly{}, nil, results.NewHistogram, time.Second, false, &stderr, "/dev/full", now, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl.loop(ctx)
	if !strings.Contains(stderr.String(), "timeline:") {
		t.Fatalf("stderr %q: want the timeline write error", stderr.String())
	}
}
