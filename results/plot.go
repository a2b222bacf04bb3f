package results

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// LatencySeries is one named histogram of a latency plot.
type LatencySeries struct {
	Name string // legend, e.g. "ack", "hw lag", "e2e"
	H    *Histogram
}

// PlotLatency writes a PNG percentile plot like HdrHistogram's plotter: x = percentile on a log
// scale of 1/(1-p) (labels 0%, 90%, 99%, 99.9%, ...), y = latency in µs, one line per
// non-empty series. A plot with no non-empty series is an error.
func PlotLatency(path, title string, series ...LatencySeries) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Scale = plot.LogScale{}
	maxX := 10.0
	var lines []any
	for _, s := range series {
		if s.H == nil || s.H.Count() == 0 {
			continue
		}
		var xys plotter.XYs
		for _, b := range s.H.Hdr().CumulativeDistributionWithTicks(5) {
			q := b.Quantile / 100
			if q >= 1 {
				break
			}
			x := 1 / (1 - q)
			xys = append(xys, plotter.XY{X: x, Y: float64(b.ValueAt)})
			maxX = math.Max(maxX, x)
		}
		if len(xys) == 0 {
			xys = append(xys, plotter.XY{X: 1, Y: float64(s.H.Max())})
		}
		lines = append(lines, s.Name, xys)
	}
	if len(lines) == 0 {
		return fmt.Errorf("results: plot %s: no non-empty histogram", path)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	var ticks plot.ConstantTicks
	for x, label := 1.0, "0%"; x <= maxX*10; x *= 10 {
		ticks = append(ticks, plot.Tick{Value: x, Label: label})
		label = percentLabel(1 - 1/(x*10))
	}
	p.X.Tick.Marker = ticks
	p.X.Min = 1
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return savePNG(path, 8*vg.Inch, 5*vg.Inch, func(c draw.Canvas) { p.Draw(c) })
}

func percentLabel(q float64) string {
	s := fmt.Sprintf("%.6f", q*100)
	for len(s) > 0 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s + "%"
}

// PlotTimeline writes a PNG of a run's timeline: throughput (records/s) on top and ISR size
// (min and max over partitions) below, against seconds since the measured start.
func PlotTimeline(path, title string, rows []TimelineRow) error {
	if len(rows) == 0 {
		return fmt.Errorf("results: plot %s: empty timeline", path)
	}
	tp := plot.New()
	tp.Title.Text = title
	tp.Y.Label.Text = "records/s"
	tp.X.Label.Text = "t (s)"
	isr := plot.New()
	isr.Y.Label.Text = "ISR size"
	isr.X.Label.Text = "t (s)"
	var rps, imin, imax plotter.XYs
	maxISR := 1
	for _, r := range rows {
		rps = append(rps, plotter.XY{X: r.T, Y: r.RecordsPerS})
		imin = append(imin, plotter.XY{X: r.T, Y: float64(r.ISRMin)})
		imax = append(imax, plotter.XY{X: r.T, Y: float64(r.ISRMax)})
		if r.ISRMax > maxISR {
			maxISR = r.ISRMax
		}
	}
	if err := plotutil.AddLines(tp, "records/s", rps); err != nil {
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	lmin, err := plotter.NewLine(imin)
	if err != nil {
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	lmin.Color = color.RGBA{R: 200, A: 255}
	lmax, err := plotter.NewLine(imax)
	if err != nil {
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	lmax.Color = color.RGBA{B: 200, A: 255}
	lmax.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	isr.Add(lmin, lmax, plotter.NewGrid())
	isr.Legend.Add("isr min", lmin)
	isr.Legend.Add("isr max", lmax)
	isr.Legend.Top = true
	isr.Y.Min, isr.Y.Max = 0, float64(maxISR)+0.5
	tp.Y.Min = 0
	tp.Add(plotter.NewGrid())
	plots := [][]*plot.Plot{{tp}, {isr}}
	return savePNG(path, 8*vg.Inch, 6*vg.Inch, func(c draw.Canvas) {
		canvases := plot.Align(plots, draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, c)
		tp.Draw(canvases[0][0])
		isr.Draw(canvases[1][0])
	})
}

func savePNG(path string, w, h vg.Length, draw func(draw.Canvas)) error {
	img := vgimg.New(w, h)
	dc := drawCanvas(img)
	draw(dc)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("results: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("results: plot %s: %w", path, err)
	}
	return nil
}

func drawCanvas(img *vgimg.Canvas) draw.Canvas { return draw.New(img) }
