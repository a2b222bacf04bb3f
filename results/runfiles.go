package results

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// RunFiles is what WriteRun writes into a run directory besides result.json.
type RunFiles struct {
	// Hgrms are written as <Name> (WriteHgrm), in this order.
	Hgrms []NamedHistogram
	// Latency is latency.png's series; those without values are left out, and with none
	// left there is no plot.
	Latency []LatencySeries
	// Timeline is timeline.png's rows (no plot when empty).
	Timeline []TimelineRow
	// PlotFailed is told why a plot could not be drawn (plots are best effort: a failed one
	// is left out); nil ignores it.
	PlotFailed func(error)
}

// NamedHistogram is a histogram and the name of its .hgrm file.
type NamedHistogram struct {
	Name string // "ack_latency.hgrm"
	H    *Histogram
}

// WriteRun writes a run's files into dir and lists them in res.Files: the .hgrm files,
// bench.txt (WriteBench of res alone), the plots latency.png and timeline.png, and last
// result.json (WriteResult). The first file that cannot be written ends it with an error
// naming the file. It may be called concurrently for different dirs and results.
func WriteRun(dir string, res *Result, f RunFiles) error {
	for _, x := range f.Hgrms {
		p, err := writeRunFile(dir, x.Name, func(w io.Writer) error { return WriteHgrm(w, x.H) })
		if err != nil {
			return err
		}
		res.Files.Hgrm = append(res.Files.Hgrm, p)
	}
	p, err := writeRunFile(dir, "bench.txt", func(w io.Writer) error { return WriteBench(w, res) })
	if err != nil {
		return err
	}
	res.Files.Bench = p
	plotFailed := func(err error) {
		if f.PlotFailed != nil {
			f.PlotFailed(err)
		}
	}
	var series []LatencySeries
	for _, s := range f.Latency {
		if s.H.Count() > 0 {
			series = append(series, s)
		}
	}
	if len(series) > 0 {
		p := filepath.Join(dir, "latency.png")
		if err := PlotLatency(p, res.Name+" "+res.ID, series...); err == nil {
			res.Files.Plots = append(res.Files.Plots, p)
		} else {
			plotFailed(err)
		}
	}
	if len(f.Timeline) > 0 {
		p := filepath.Join(dir, "timeline.png")
		if err := PlotTimeline(p, res.Name+" "+res.ID, f.Timeline); err == nil {
			res.Files.Plots = append(res.Files.Plots, p)
		} else {
			plotFailed(err)
		}
	}
	sort.Strings(res.Files.Plots)
	return WriteResult(filepath.Join(dir, "result.json"), res)
}

// writeRunFile creates dir/name and writes it with fn; it returns the file's path.
func writeRunFile(dir, name string, fn func(w io.Writer) error) (string, error) {
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	if err := fn(f); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return p, f.Close()
}
