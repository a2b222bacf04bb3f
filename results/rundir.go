package results

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// RunHistograms are a run's merged histograms (µs). A nil histogram counts as empty.
type RunHistograms struct {
	Ack, HWLag, E2E, SendDelay *Histogram
}

// SummarizeInto sets r's ack_latency_us, hw_lag_us, e2e_latency_us and send_delay_us.
func (h RunHistograms) SummarizeInto(r *Result) {
	r.AckLatencyUs = Summarize(h.Ack)
	r.HWLagUs = Summarize(h.HWLag)
	r.E2ELatencyUs = Summarize(h.E2E)
	r.SendDelayUs = Summarize(h.SendDelay)
}

// File names WriteRunDir uses inside a run directory.
const (
	AckHgrmFile       = "ack_latency.hgrm"
	HWLagHgrmFile     = "hw_lag.hgrm"
	E2EHgrmFile       = "e2e_latency.hgrm"
	SendDelayHgrmFile = "send_delay.hgrm"
	BenchFile         = "bench.txt"
	TimelineFile      = "timeline.csv"
	LatencyPlotFile   = "latency.png"
	TimelinePlotFile  = "timeline.png"
)

// WriteRunDir writes a finished run's files into dir (created if needed): the four summaries
// (SummarizeInto), one .hgrm per non-empty histogram, bench.txt, latency.png (when any latency
// histogram is non-empty) and timeline.png (when timeline has rows), lists them in r.Files
// (paths joined with dir; Files.Timeline and Files.Profiles set by the caller are kept, and
// Files.Timeline defaults to dir/timeline.csv when that file exists), and finally result.json.
// The caller writes timeline.csv itself during the run (Timeline) and passes its Rows here.
func WriteRunDir(dir string, r *Result, h RunHistograms, timeline []TimelineRow) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: run dir: %w", err)
	}
	h.SummarizeInto(r)
	r.Files.Hgrm = nil
	r.Files.Plots = nil
	var series []LatencySeries
	for _, x := range []struct {
		file, name string
		h          *Histogram
	}{{AckHgrmFile, "ack", h.Ack}, {HWLagHgrmFile, "hw lag", h.HWLag}, {E2EHgrmFile, "e2e", h.E2E}, {SendDelayHgrmFile, "send delay", h.SendDelay}} {
		if x.h == nil || x.h.Count() == 0 {
			continue
		}
		p := filepath.Join(dir, x.file)
		if err := writeFile(p, func(w *bufio.Writer) error { return WriteHgrm(w, x.h) }); err != nil {
			return err
		}
		r.Files.Hgrm = append(r.Files.Hgrm, p)
		if x.h != h.SendDelay {
			series = append(series, LatencySeries{Name: x.name, H: x.h})
		}
	}
	bench := filepath.Join(dir, BenchFile)
	if err := writeFile(bench, func(w *bufio.Writer) error { return WriteBench(w, r) }); err != nil {
		return err
	}
	r.Files.Bench = bench
	if len(series) > 0 {
		p := filepath.Join(dir, LatencyPlotFile)
		if err := PlotLatency(p, r.Name+": latency by percentile", series...); err != nil {
			return err
		}
		r.Files.Plots = append(r.Files.Plots, p)
	}
	if len(timeline) > 0 {
		p := filepath.Join(dir, TimelinePlotFile)
		if err := PlotTimeline(p, r.Name+": throughput and ISR size", timeline); err != nil {
			return err
		}
		r.Files.Plots = append(r.Files.Plots, p)
	}
	if r.Files.Timeline == "" {
		if p := filepath.Join(dir, TimelineFile); fileExists(p) {
			r.Files.Timeline = p
		}
	}
	return WriteResult(filepath.Join(dir, ResultFileName), r)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFile(path string, fn func(*bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	w := bufio.NewWriter(f)
	if err := fn(w); err != nil {
		f.Close()
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: write %s: %w", path, err)
	}
	return nil
}
