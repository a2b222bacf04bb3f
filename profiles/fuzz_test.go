package profiles

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/pprof/profile"
)

// FuzzAnalyze feeds arbitrary bytes to the analysis functions: whatever
// pprof's parser accepts must not make Top, Diff or Folded panic.
func FuzzAnalyze(f *testing.F) {
	var buf bytes.Buffer
	if err := brokerProfile().Write(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profile.ParseData(data)
		if err != nil || len(p.SampleType) == 0 {
			return
		}
		for _, by := range []string{"flat", "cum", LabelRole} {
			if err := top(io.Discard, "fuzz", p, by, 3); err != nil {
				t.Fatal(err)
			}
		}
		_ = folded(io.Discard, p)
		_ = diff(io.Discard, "a", "b", p, p.Copy(), 3, false)
		_ = diff(io.Discard, "a", "b", p, p.Copy(), 3, true)
	})
}
