package workloads

import (
	"io"
	"os"
	"sync"
)

// lockedWriter serialises the writes of a run's many goroutines (the cluster's brokers and
// coordinators logging, faults, the progress line) to a caller's writer, which need not be
// safe for concurrent use (a strings.Builder, a bytes.Buffer). Stdout and Stderr share one
// mutex: callers often pass the same writer as both.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lockWriters wraps o's Stdout and Stderr in lockedWriters sharing one mutex, except an
// *os.File (each write is one system call; the progress line asks whether Stderr is a
// terminal).
func (o *Options) lockWriters() {
	mu := new(sync.Mutex)
	for _, w := range []*io.Writer{&o.Stdout, &o.Stderr} {
		switch (*w).(type) {
		case *os.File, lockedWriter:
		default:
			*w = lockedWriter{mu, *w}
		}
	}
}
