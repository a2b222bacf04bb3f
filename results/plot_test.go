package results

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 200 {
		t.Errorf("%s is %v", path, b)
	}
}

func TestPlotLatency(t *testing.T) {
	ack, hw := NewHistogram(), NewHistogram()
	for i := int64(0); i < 5000; i++ {
		ack.Record(40 + i%100)
		hw.Record(20 + i%30)
	}
	ack.Record(5000)
	path := filepath.Join(plotDir(t), "latency.png")
	if err := PlotLatency(path, "default: latency by percentile", LatencySeries{"ack", ack}, LatencySeries{"hw lag", hw}, LatencySeries{"e2e", NewHistogram()}); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	if err := PlotLatency(filepath.Join(t.TempDir(), "x.png"), "empty", LatencySeries{"e2e", NewHistogram()}); err == nil {
		t.Error("empty plot accepted")
	}
}

func TestPlotTimeline(t *testing.T) {
	var rows []TimelineRow
	for i := 0; i < 20; i++ {
		isr := 3
		if i >= 8 && i < 12 {
			isr = 2
		}
		rows = append(rows, TimelineRow{T: float64(i) * 0.5, RecordsPerS: 5000 + float64(i%3)*100, ISRMin: isr, ISRMax: 3})
	}
	path := filepath.Join(plotDir(t), "timeline.png")
	if err := PlotTimeline(path, "follower-pause", rows); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	if err := PlotTimeline(path, "x", nil); err == nil {
		t.Error("empty timeline accepted")
	}
}

func TestPercentLabel(t *testing.T) {
	for q, want := range map[float64]string{0.9: "90%", 0.99: "99%", 0.999: "99.9%", 0.99999: "99.999%"} {
		if got := percentLabel(q); got != want {
			t.Errorf("percentLabel(%v) = %q, want %q", q, got, want)
		}
	}
}

// plotDir is t.TempDir(), or $ISRBENCH_PLOT_DIR to look at the plots.
func plotDir(t *testing.T) string {
	if d := os.Getenv("ISRBENCH_PLOT_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}
