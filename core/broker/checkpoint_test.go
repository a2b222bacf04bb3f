package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
)

func TestHWCheckpointFormatRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, HWCheckpointFile)
	want := map[tp]int64{{"b", 1}: 99, {"a", 0}: 1234, {"a", 10}: 0}
	if err := os.WriteFile(path, []byte("0\n3\n"+strings.Join(encodeHWCheckpoint(want), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := readHWCheckpoint(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: %d want %d", k, got[k], v)
		}
	}
	if lines := encodeHWCheckpoint(want); lines[0] != "a 0 1234" || lines[1] != "a 10 0" || lines[2] != "b 1 99" {
		t.Errorf("lines %q", lines)
	}
	// Missing file: empty.
	if m, _, err := readHWCheckpoint(vfs.OS, filepath.Join(dir, "nope")); err != nil || len(m) != 0 {
		t.Errorf("missing: %v %v", m, err)
	}
	for name, body := range map[string]string{
		"bad version":   "1\n1\na 0 1\n",
		"two fields":    "0\n1\na 0\n",
		"bad partition": "0\n1\na x 1\n",
		"neg offset":    "0\n1\na 0 -5\n",
		"count short":   "0\n2\na 0 1\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readHWCheckpoint(vfs.OS, path); err == nil {
			t.Errorf("%s: no error for %q", name, body)
		} else if !strings.Contains(err.Error(), HWCheckpointFile) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

func TestCloseWritesCheckpointAndRestartRestoresHW(t *testing.T) {
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", 2, 1, nil)
	l := c.leader("t", 0)
	for i := 0; i < 3; i++ {
		if res := produce(t, l, -1, "t", 0, batch("r", 7)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := readHWCheckpointFile(filepath.Join(c.dirs[0], HWCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if m["t-0"] != 21 || m["t-1"] != 0 || len(m) != 2 {
		t.Fatalf("checkpoint %v, want t-0=21 t-1=0", m)
	}
	raw, _ := os.ReadFile(filepath.Join(c.dirs[0], HWCheckpointFile))
	if string(raw) != "0\n2\nt 0 21\nt 1 0\n" {
		t.Errorf("checkpoint file %q", raw)
	}
	// Restart on the same dir: the log recovers and serves the same data.
	nb := c.start(0)
	c.waitFor("restarted leader", 10*time.Second, func() bool {
		r, ok := nb.Replica("t", 0)
		return ok && r.IsLeader() && r.HW() == 21
	})
	vals, hw := consume(t, nb, "t", 0, 0)
	if hw != 21 || len(vals) != 21 || vals[20] != "r-6" {
		t.Fatalf("after restart: hw %d, %d values", hw, len(vals))
	}
	// Double Close is fine.
	if err := nb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := nb.Close(); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeHWCheckpoint: arbitrary checkpoint lines never panic, and what
// decodes re-encodes to an equivalent map.
func FuzzDecodeHWCheckpoint(f *testing.F) {
	f.Add(0, "t 0 12\nt 1 0")
	f.Add(0, "a b c")
	f.Add(1, "t 0 1")
	f.Add(0, "t -1 5\nt 0 -5\nt 99999999999 1")
	f.Fuzz(func(t *testing.T, version int, body string) {
		lines := strings.Split(body, "\n")
		m, err := decodeHWCheckpoint("fuzz", version, lines)
		if err != nil {
			return
		}
		m2, err := decodeHWCheckpoint("fuzz", 0, encodeHWCheckpoint(m))
		if err != nil {
			t.Fatalf("re-decode of %v: %v", m, err)
		}
		if len(m2) != len(m) {
			t.Fatalf("round trip %v -> %v", m, m2)
		}
		for k, v := range m {
			if m2[k] != v {
				t.Fatalf("round trip %v -> %v", m, m2)
			}
		}
	})
}

// readHWCheckpointFile reads a replication-offset-checkpoint file on the OS into
// "topic-partition" -> HW (exclusive). A missing file gives an empty map.
func readHWCheckpointFile(path string) (map[string]int64, error) {
	m, _, err := readHWCheckpoint(vfs.OS, path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k.String()] = v
	}
	return out, nil
}
