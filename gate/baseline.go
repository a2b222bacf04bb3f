package gate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/isrbench/isrbench/results"
)

// OneConfig returns copies of rs whose Config keeps only the keys with one value in all of them:
// a gate side is repetitions of one configuration by construction, and keys that differ between
// its runs are outcomes recorded in the config (counters, ids), which must not split the
// repetitions into groups. rs is not modified.
func OneConfig(rs []*results.Result) []*results.Result {
	if len(rs) == 0 {
		return rs
	}
	common := map[string]any{}
	for k, v := range rs[0].Config {
		same := true
		for _, r := range rs[1:] {
			if w, ok := r.Config[k]; !ok || fmt.Sprint(w) != fmt.Sprint(v) {
				same = false
				break
			}
		}
		if same {
			common[k] = v
		}
	}
	out := make([]*results.Result, len(rs))
	for i, r := range rs {
		c := *r
		c.Config = common
		out[i] = &c
	}
	return out
}

// WriteBaseline replaces the result.json files under dir with rs, one r<i>/result.json each,
// without the base64 histogram encodings and file links (compare reads only the summary
// numbers); other files in dir (a README) stay.
func WriteBaseline(dir string, rs []*results.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gate: --write-baseline: %w", err)
	}
	var old []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == results.ResultFileName {
			old = append(old, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gate: --write-baseline: %w", err)
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		_ = os.Remove(filepath.Dir(p)) // only if now empty
	}
	for i, r := range rs {
		c := *r
		for _, s := range []*results.Summary{&c.AckLatencyUs, &c.HWLagUs, &c.E2ELatencyUs, &c.SendDelayUs} {
			s.Hdr = ""
		}
		c.Files = results.Files{}
		d := filepath.Join(dir, fmt.Sprintf("r%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		p := filepath.Join(d, results.ResultFileName)
		if err := results.WriteResult(p, &c); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		if err := os.Chmod(p, 0o644); err != nil { // a committed file, readable by all
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
	}
	return nil
}
