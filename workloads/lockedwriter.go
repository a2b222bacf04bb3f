package workloads

import (
	"io"
	"sync"
)

// lockedWriter serializes the writes of several goroutines to one writer (a run's Stderr: the
// progress line, the fault executor, the timeline and the embedded cluster's logs), so that a
// writer that is not safe for concurrent use (a strings.Builder, a bytes.Buffer) can be given.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newLockedWriter(w io.Writer) io.Writer {
	if lw, ok := w.(*lockedWriter); ok {
		return lw
	}
	return &lockedWriter{w: w}
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// underlying is the writer a lockedWriter writes to (w itself otherwise).
func underlying(w io.Writer) io.Writer {
	if lw, ok := w.(*lockedWriter); ok {
		return lw.w
	}
	return w
}
