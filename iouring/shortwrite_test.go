package iouring

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKernelShortWrite makes the kernel itself return a short write: with
// RLIMIT_FSIZE at 10000 bytes, a 16000-byte WRITEV at offset 0 completes
// with 10000; the writer resubmits the remainder at offset 10000, which fails
// with EFBIG. RLIMIT_FSIZE is process-wide, so the test re-executes itself
// and sets the limit only in the child (Go ignores the SIGXFSZ that follows).
func TestKernelShortWrite(t *testing.T) {
	if os.Getenv("IOURING_SHORTWRITE_CHILD") == "1" {
		shortWriteChild(t)
		return
	}
	if ok, reason := Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelShortWrite$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "IOURING_SHORTWRITE_CHILD=1", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestKernelShortWrite") {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func shortWriteChild(t *testing.T) {
	const limit, size = 10000, 16000
	g := newTestRing(t, 4)
	f := tempFile(t)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: unix.RLIM_INFINITY}); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	data := pattern(3, size)
	err := writeAt(g, f, 0, [][]byte{data[:6000], data[6000:]})
	if !errors.Is(err, unix.EFBIG) {
		t.Fatalf("WriteAt past RLIMIT_FSIZE: err = %v, want EFBIG", err)
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "offset 10000") {
		t.Errorf("error does not name the resubmitted offset 10000: %v", err)
	}
	got, rerr := os.ReadFile(f.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(got) != limit || !bytes.Equal(got, data[:limit]) {
		t.Fatalf("file has %d bytes, want the first %d of the write", len(got), limit)
	}
	if st := g.Stats(); st.Resubmits != 1 || st.SQEs != 2 {
		t.Fatalf("stats %+v: want 1 resubmission and 2 SQEs (short write, then the remainder)", st)
	}
}
