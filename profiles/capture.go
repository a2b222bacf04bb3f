package profiles

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"

	"github.com/google/pprof/profile"
)

// Kinds are the profile kinds Start accepts. "trace" is Go's execution
// tracer (runtime/trace), written to trace.out for `go tool trace`; every
// other kind is a pprof profile written to <kind>.pprof.
var Kinds = []string{"cpu", "heap", "allocs", "mutex", "block", "goroutine", "trace"}

// FileName is the file Stop writes for kind inside the session's directory.
func FileName(kind string) string {
	if kind == "trace" {
		return "trace.out"
	}
	return kind + ".pprof"
}

// Options tunes the sampling rates enabled while a Session runs.
type Options struct {
	// MutexProfileFraction is passed to runtime.SetMutexProfileFraction while
	// a "mutex" profile is captured: on average 1/n contention events are
	// reported. Default 10.
	MutexProfileFraction int
	// BlockProfileRate is passed to runtime.SetBlockProfileRate while a
	// "block" profile is captured: one event sampled per rate nanoseconds
	// blocked. Default 10000 (10 µs).
	BlockProfileRate int
}

// DefaultOptions are the rates Start uses.
func DefaultOptions() Options { return Options{MutexProfileFraction: 10, BlockProfileRate: 10000} }

// ParseKinds splits a comma-separated list such as "cpu,heap,mutex" and
// validates it (see ValidateKinds).
func ParseKinds(s string) ([]string, error) {
	var kinds []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds = append(kinds, k)
		}
	}
	return kinds, ValidateKinds(kinds)
}

// ValidateKinds checks that kinds is non-empty, names only Kinds and has no duplicates.
func ValidateKinds(kinds []string) error {
	if len(kinds) == 0 {
		return fmt.Errorf("profiles: no profile kinds given (allowed: %s)", strings.Join(Kinds, ", "))
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return fmt.Errorf("profiles: unknown profile kind %q (allowed: %s)", k, strings.Join(Kinds, ", "))
		}
		if seen[k] {
			return fmt.Errorf("profiles: profile kind %q given twice", k)
		}
		seen[k] = true
	}
	return nil
}

// active guards the process-wide profiler state (CPU profiler, mutex and
// block rates): one Session at a time.
var active struct {
	sync.Mutex
	session *Session
}

// Session is one profiling window: started with Start after warm-up,
// ended with Stop at the end of measurement. Its methods may be called
// from any goroutine; Stop is effective once.
type Session struct {
	dir   string
	kinds []string
	opts  Options

	mu        sync.Mutex
	stopped   bool
	cpuFile   *os.File
	traceFile *os.File
	prevMutex int
	base      map[string]*profile.Profile // cumulative profiles at Start (allocs, mutex, block)
}

// Start begins capturing kinds (a subset of Kinds) into dir (created if
// missing) with DefaultOptions. See StartWithOptions.
func Start(kinds []string, dir string) (*Session, error) {
	return StartWithOptions(kinds, dir, DefaultOptions())
}

// StartWithOptions begins capturing: the CPU profiler and the execution
// tracer start now; mutex and
// block sampling are enabled now and restored at Stop; allocs, mutex and
// block are written at Stop as deltas over the session (cumulative counts at
// Stop minus those at Start, as net/http/pprof's ?seconds=); heap (in-use,
// after a GC) and goroutine are snapshots taken at Stop. Only one Session may
// be active per process.
func StartWithOptions(kinds []string, dir string, opts Options) (*Session, error) {
	if err := ValidateKinds(kinds); err != nil {
		return nil, err
	}
	if opts.MutexProfileFraction <= 0 || opts.BlockProfileRate <= 0 {
		return nil, fmt.Errorf("profiles: MutexProfileFraction (%d) and BlockProfileRate (%d) must be > 0", opts.MutexProfileFraction, opts.BlockProfileRate)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	active.Lock()
	defer active.Unlock()
	if active.session != nil {
		return nil, errors.New("profiles: another profiling session is active")
	}
	s := &Session{dir: dir, kinds: slices.Clone(kinds), opts: opts, base: map[string]*profile.Profile{}, prevMutex: -1}
	if slices.Contains(kinds, "mutex") {
		s.prevMutex = runtime.SetMutexProfileFraction(opts.MutexProfileFraction)
	}
	if slices.Contains(kinds, "block") {
		runtime.SetBlockProfileRate(opts.BlockProfileRate)
	}
	for _, k := range []string{"allocs", "mutex", "block"} {
		if !slices.Contains(kinds, k) {
			continue
		}
		p, err := lookupProfile(k)
		if err != nil {
			s.restoreRates()
			return nil, err
		}
		s.base[k] = p
	}
	if slices.Contains(kinds, "cpu") {
		f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
		if err != nil {
			s.restoreRates()
			return nil, fmt.Errorf("profiles: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			s.restoreRates()
			return nil, fmt.Errorf("profiles: start cpu profile: %w", err)
		}
		s.cpuFile = f
	}
	if slices.Contains(kinds, "trace") {
		f, err := os.Create(filepath.Join(dir, FileName("trace")))
		if err == nil {
			if err = trace.Start(f); err != nil {
				f.Close()
				err = fmt.Errorf("start execution trace: %w", err)
			}
		}
		if err != nil {
			if s.cpuFile != nil {
				pprof.StopCPUProfile()
				s.cpuFile.Close()
			}
			s.restoreRates()
			return nil, fmt.Errorf("profiles: %w", err)
		}
		s.traceFile = f
	}
	active.session = s
	return s, nil
}

func (s *Session) restoreRates() {
	if s.prevMutex >= 0 {
		runtime.SetMutexProfileFraction(s.prevMutex)
		s.prevMutex = -1
	}
	if slices.Contains(s.kinds, "block") {
		// Go has no getter for the block rate; 0 (off) is the runtime default.
		runtime.SetBlockProfileRate(0)
	}
}

// Dir is the directory the profiles are written to.
func (s *Session) Dir() string { return s.dir }

// Stop ends the session and writes <dir>/<kind>.pprof for every kind, in
// the order given to Start; it returns the paths written. Sampling rates
// are restored even when writing fails. A second Stop returns an error.
func (s *Session) Stop() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errors.New("profiles: session already stopped")
	}
	s.stopped = true
	var errs []error
	if s.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := s.cpuFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("profiles: cpu: %w", err))
		}
	}
	if s.traceFile != nil {
		trace.Stop()
		if err := s.traceFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("profiles: trace: %w", err))
		}
	}
	var paths []string
	for _, k := range s.kinds {
		path := filepath.Join(s.dir, FileName(k))
		if k == "cpu" || k == "trace" {
			paths = append(paths, path)
			continue
		}
		if err := s.write(k, path); err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, path)
	}
	s.restoreRates()
	active.Lock()
	if active.session == s {
		active.session = nil
	}
	active.Unlock()
	return paths, errors.Join(errs...)
}

func (s *Session) write(kind, path string) error {
	if kind == "heap" {
		runtime.GC() // the heap profile describes the heap as of the last GC
	}
	p, err := lookupProfile(kind)
	if err != nil {
		return err
	}
	if base := s.base[kind]; base != nil {
		if p, err = delta(base, p); err != nil {
			return fmt.Errorf("profiles: %s delta: %w", kind, err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("profiles: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profiles: write %s: %w", path, err)
	}
	return nil
}

func lookupProfile(kind string) (*profile.Profile, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup(kind).WriteTo(&buf, 0); err != nil {
		return nil, fmt.Errorf("profiles: read %s profile: %w", kind, err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return nil, fmt.Errorf("profiles: parse %s profile: %w", kind, err)
	}
	return p, nil
}

// delta returns cur - base, dropping samples that became all-zero.
func delta(base, cur *profile.Profile) (*profile.Profile, error) {
	neg := base.Copy()
	neg.Scale(-1)
	d, err := profile.Merge([]*profile.Profile{neg, cur})
	if err != nil {
		return nil, err
	}
	d.TimeNanos = cur.TimeNanos
	d.DurationNanos = cur.TimeNanos - base.TimeNanos
	kept := d.Sample[:0]
	for _, smp := range d.Sample {
		if slices.ContainsFunc(smp.Value, func(v int64) bool { return v != 0 }) {
			kept = append(kept, smp)
		}
	}
	d.Sample = kept
	return d, nil
}
