// Package profiles captures pprof profiles of an isrbench run and analyses
// them. It imports no core package: core code sets the same pprof label keys
// (LabelBroker, LabelRole) with runtime/pprof directly.
//
// # Capture
//
// Start(kinds, dir) opens a profiling window (the harness starts it after
// warm-up); Session.Stop ends it and writes <dir>/<kind>.pprof for each kind
// (trace: <dir>/trace.out):
//
//	cpu        sampled CPU time (100 Hz) over the window
//	heap       in-use memory at Stop (after a GC)
//	allocs     allocations during the window (cumulative at Stop minus at Start)
//	mutex      contention during the window (delta; fraction enabled only while profiling)
//	block      blocking during the window (delta; rate enabled only while profiling)
//	goroutine  goroutine stacks at Stop
//	trace      Go's execution tracer over the window, for `go tool trace`
//	           (scheduler latency, blocking, per-goroutine timelines)
//
// Mutex and block sampling cost CPU, so they are enabled only between Start
// and Stop; the previous mutex fraction is restored, the block rate is reset
// to 0 (Go's default; the runtime has no getter for it). The CPU profiler,
// mutex and block rates are process-wide, so one Session is active at a time.
//
// # Labels
//
// Goroutines are labelled broker=<id> and role=<Role*> (Do, Labels); every
// sample of a labelled goroutine carries them, so a profile of a whole
// in-process cluster can be split per broker and per role (Top with
// by=LabelRole or LabelBroker).
//
// # Analysis
//
// Top (flat/cum or per label value), Diff (base scaled by -1 and merged with
// new, as pprof -diff_base; largest flat growth first), Folded (folded stacks
// for flamegraph.pl / speedscope) and WebTo (pprof's own web UI through
// github.com/google/pprof/driver, flame graph at /ui/flamegraph) read pprof
// files with github.com/google/pprof/profile. The value shown is the
// profile's default sample type (cpu time, inuse_space, contention delay).
//
// # Concurrency
//
// Start and Session methods may be called from any goroutine (Stop is
// effective once). The analysis functions are independent and safe for
// concurrent use; WebTo blocks until its context is done.
package profiles
