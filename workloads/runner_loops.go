package workloads

import (
	"context"
	"errors"
)

// loops holds a run's background loops and its cleanups: close stops the loops and runs the
// cleanups in the reverse order of their registration (as defers run), so that a phase can
// start what the end of the run undoes. Only the runner's goroutine calls it.
type loops struct {
	undo []func()
	errs []error // of the onCloseErr cleanups that ran
}

// loop is one background goroutine of a run. stop cancels its context and waits until it
// returned; wait only waits. Both may be called any number of times, also on a nil loop
// (one the run did not start).
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *loop) stop() {
	if l != nil {
		l.cancel()
		<-l.done
	}
}

func (l *loop) wait() {
	if l != nil {
		<-l.done
	}
}

// start runs fn on its own goroutine with a context derived from parent; close stops it.
func (ls *loops) start(parent context.Context, fn func(ctx context.Context)) *loop {
	ctx, cancel := context.WithCancel(parent)
	l := &loop{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(l.done); fn(ctx) }()
	ls.undo = append(ls.undo, l.stop)
	return l
}

// onClose registers fn to run at close, before everything registered earlier.
func (ls *loops) onClose(fn func()) { ls.undo = append(ls.undo, fn) }

// onCloseErr registers fn like onClose; close returns its error.
func (ls *loops) onCloseErr(fn func() error) {
	ls.undo = append(ls.undo, func() { ls.errs = append(ls.errs, fn()) })
}

// close stops every loop and runs every cleanup, the latest first; it returns the errors of
// the cleanups registered with onCloseErr.
func (ls *loops) close() error {
	for i := len(ls.undo) - 1; i >= 0; i-- {
		ls.undo[i]()
	}
	ls.undo = nil
	err := errors.Join(ls.errs...)
	ls.errs = nil
	return err
}
