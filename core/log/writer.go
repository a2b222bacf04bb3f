package log

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/isrbench/isrbench/iouring"
	"golang.org/x/sys/unix"
)

// iovMax is Linux's IOV_MAX: the most iovecs one pwritev takes.
const iovMax = 1024

// NewWriter returns the write path named by isrbench.io: "pwritev" (default, also ""), "write"
// or "uring". "uring" falls back to pwritev when io_uring is unavailable; WriterFallbackReason
// says why. An unknown name is an error listing the allowed values.
func NewWriter(name string) (Writer, error) {
	switch name {
	case "", "pwritev":
		return PwritevWriter{}, nil
	case "write":
		return WriteWriter{}, nil
	case "uring":
		if w, _ := sharedUring(); w != nil {
			return w, nil
		}
		return PwritevWriter{}, nil
	}
	return nil, configErrorf("isrbench.io %q unknown: want pwritev, write or uring", name)
}

// WriterFallbackReason returns why NewWriter(name) does not give the named write path, or ""
// when it does. Only "uring" can fall back (to pwritev).
func WriterFallbackReason(name string) string {
	if name != "uring" {
		return ""
	}
	_, reason := sharedUring()
	return reason
}

// PwritevWriter writes all buffers with one pwritev(2) per WriteAt (more only on a short write
// or beyond IOV_MAX buffers). It allocates nothing for up to 64 buffers. Safe for concurrent use.
type PwritevWriter struct {
	Counters *Counters // counts the pwritev(2) calls and their bytes; nil: not counted
}

// Name returns "pwritev".
func (PwritevWriter) Name() string { return "pwritev" }

// WriteAt writes bufs contiguously at off in f.
func (w PwritevWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	var stack [64]unix.Iovec
	iov := stack[:0]
	if len(bufs) > len(stack) {
		iov = make([]unix.Iovec, 0, len(bufs))
	}
	total := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
		total += len(b)
	}
	fd := f.Fd()
	for len(iov) > 0 {
		n := min(len(iov), iovMax)
		r, _, errno := unix.Syscall6(unix.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(n),
			uintptr(off), uintptr(uint64(off)>>32), 0)
		if w.Counters != nil {
			w.Counters.countWrite(&w.Counters.pwritev, int(r))
		}
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("log: pwritev %s at %d: %w", f.Name(), off, errno)
		}
		if r == 0 {
			return fmt.Errorf("log: pwritev %s at %d: wrote 0 bytes: %w", f.Name(), off, io.ErrShortWrite)
		}
		off += int64(r)
		total -= int(r)
		iov = iouring.AdvanceIovecs(iov, int(r))
	}
	if total != 0 {
		return fmt.Errorf("log: pwritev %s: %d bytes unwritten: %w", f.Name(), total, io.ErrShortWrite)
	}
	return nil
}

// WriteWriter is the naive path: one pwrite(2) per buffer. Safe for concurrent use.
type WriteWriter struct {
	Counters *Counters // counts the pwrite(2) calls and their bytes; nil: not counted
}

// Name returns "write".
func (WriteWriter) Name() string { return "write" }

// WriteAt writes each buffer with its own pwrite.
func (w WriteWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	for _, b := range bufs {
		n, err := f.WriteAt(b, off)
		if w.Counters != nil {
			w.Counters.countWrite(&w.Counters.pwrite, n)
		}
		if err != nil {
			return fmt.Errorf("log: write %s at %d: %w", f.Name(), off, err)
		}
		off += int64(len(b))
	}
	return nil
}
