package results

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run1")
	os.MkdirAll(dir, 0o755)
	f, _ := os.Create(filepath.Join(dir, TimelineFile))
	tl, _ := NewTimeline(f)
	tl.Write(TimelineRow{T: 1, RecordsPerS: 100, ISRMin: 3, ISRMax: 3})
	tl.Write(TimelineRow{T: 2, RecordsPerS: 120, ISRMin: 2, ISRMax: 3})
	tl.Flush()
	f.Close()

	h := RunHistograms{Ack: NewHistogram(), HWLag: NewHistogram(), E2E: NewHistogram()}
	for i := int64(0); i < 1000; i++ {
		h.Ack.Record(50 + i%40)
		h.HWLag.RecordNs(20_000 + i*10)
	}
	r := fakeResult("default", "run1", cfg("acks", "all"), 100, 1, 1)
	r.Files = Files{Profiles: []string{"cpu.pprof"}}
	if err := WriteRunDir(dir, r, h, tl.Rows()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResult(filepath.Join(dir, ResultFileName))
	if err != nil {
		t.Fatal(err)
	}
	if got.AckLatencyUs.Count != 1000 || got.HWLagUs.Count != 1000 || got.E2ELatencyUs.Count != 0 || got.SendDelayUs.Hdr == "" {
		t.Errorf("summaries: ack %d hw %d e2e %d", got.AckLatencyUs.Count, got.HWLagUs.Count, got.E2ELatencyUs.Count)
	}
	if len(got.Files.Hgrm) != 2 || len(got.Files.Plots) != 2 || got.Files.Timeline == "" || got.Files.Bench == "" || got.Files.Profiles[0] != "cpu.pprof" {
		t.Errorf("files %+v", got.Files)
	}
	for _, p := range append(append(got.Files.Hgrm, got.Files.Plots...), got.Files.Bench, got.Files.Timeline) {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	checkPNG(t, got.Files.Plots[0])
}
