package log

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

// RecoveryPointFile is the checkpoint in a replica directory holding the recovery point: the
// offset below which every batch was fsynced and needs no CRC check on Open.
const RecoveryPointFile = "recovery-point"

// Log is one replica's segmented log in its own directory.
//
// Concurrency: every method is safe for concurrent use. Appends are group-committed (see the
// package doc); Read, LEO, LogStart, Size and Segments never wait for a write syscall. Mutations
// (Append's commit, TruncateTo, TruncateFullyAndStartAt, ApplyRetention, IncrementLogStart,
// Flush, Close, SimulatePowerLoss) are serialised.
type Log struct {
	dir    string
	cfg    Config
	fs     vfs.FS
	w      Writer
	syncer Syncer // nil: File.Sync
	nowMs  func() int64
	flushT bool       // flush.ms is finite
	cache  *fileCache // of sealed segments' files
	active *fileCache // of active segments' files

	segBytes atomic.Int64 // cfg.SegmentBytes, read lock-free by Append's validation
	leo      atomic.Int64 // exclusive; published after the write
	logStart atomic.Int64 // inclusive; >= segs[0].base, inside segs[0] (IncrementLogStart); changed under wmu and mu
	size     atomic.Int64
	closed   atomic.Bool
	poisoned atomic.Pointer[error]
	// rollFlush is set while segments sealed by a roll wait in wmu.rolled for their flush
	// (flushRolled), which the Append that rolled runs after its group commit.
	rollFlush atomic.Bool
	// flushQueued is set while flushJob waits for Config.RollFlush to run it.
	flushQueued atomic.Bool
	flushJob    func()
	// dropDue is set by a commit that made a drop-behind step due (dropbehind.go); dropMu
	// lets one goroutine at a time run it.
	dropDue    atomic.Bool
	dropMu     sync.Mutex
	dropQueued atomic.Bool // dropJob waits for the drop-behind goroutine or Config.RollFlush to run it
	dropJob    func()

	mu struct { // guards segs and the segments' published fields
		sync.RWMutex
		segs []*segment
	}

	// wmu serialises mutations and guards the fields grouped with it.
	wmu struct {
		sync.Mutex
		unflushed     int64 // records appended since the last fsync
		lastFlushMs   int64
		recoveryPoint int64 // persisted recovery point
		logStartCkpt  int64 // what LogStartFile holds: -1 no file, -2 an unusable one
		dirDirty      bool  // a segment was created by a roll since the directory was last fsynced
		bufs          [][]byte
		pend          []pending
		idxScratch    []byte
		rolled        []rolledSeg // sealed by a roll, not flushed yet (see flushRolled)
		ahead         []*segment  // commit's scratch: segments created for a request's rolls
		// beforeLogStart is SetBeforeLogStart's hook (nil: none).
		beforeLogStart func(newStart int64) error
	}

	// idxMu serialises the writes to .index files: the roll flush writes outside wmu, the
	// holders of wmu (flush, truncation) take it after wmu.
	idxMu sync.Mutex

	// txnMu guards the segments' .txnindex files and fields (txnindex.go). Lock order:
	// wmu, then txnMu, then mu.
	txnMu sync.Mutex

	gc committer[*appendReq] // the group commit of Append (commit: l.commit)

	// openEpochs: where the batches' partitionLeaderEpoch rose, in the log Open recovered,
	// cut by later truncations (EpochStartsAtOpen); written by Open and, under wmu, the
	// truncations.
	openEpochs []EpochStart
}

// Open opens (creating if needed) the log in dir, recovering it: batches from the recovery
// point on are CRC-checked, a torn or corrupt tail is truncated, segments after a corrupt one
// are deleted, missing or damaged indexes are rebuilt, and what was found is returned in
// Recovery. I/O errors fail Open (wrapping kerr.KafkaStorageError; a resource error, see
// IsResourceError, when it could not open a file for want of a descriptor); corruption does
// not.
func Open(dir string, cfg Config) (*Log, Recovery, error) {
	l, err := newLog(dir, cfg)
	if err != nil {
		return nil, Recovery{}, err
	}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, Recovery{}, storageErrorf("create log dir: %w", err)
	}
	rec, err := l.recover()
	if err != nil {
		for _, s := range l.mu.segs {
			s.retire()
		}
		return nil, rec, err
	}
	l.opened()
	return l, rec, nil
}

// Create creates the log of a new replica in dir, an existing directory that holds no
// log: its first, empty segment (the .log file, created exclusively; the .index comes
// with its first entry) and nothing else, reading nothing (Kafka's LogManager creates a
// new log's directory and empty segment; an empty log needs no recovery point, log-start
// or index file). The result is the Log Open would return for an empty dir; a .log
// already there fails Create (the directory was not new) and leaves it as it was. I/O
// errors wrap kerr.KafkaStorageError, or are resource errors, as Open's.
func Create(dir string, cfg Config) (*Log, error) {
	l, err := newLog(dir, cfg)
	if err != nil {
		return nil, err
	}
	s := l.newSegment(0)
	f, err := l.fs.OpenFile(s.logPath, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, storageErrorf("create segment %s: %w", s.logPath, err)
	}
	s.hold(f)
	l.mu.segs = []*segment{s}
	if err := l.fs.SyncDir(dir); err != nil {
		s.retire()
		return nil, storageErrorf("fsync dir %s: %w", dir, err)
	}
	l.wmu.logStartCkpt = -1 // no log-start file
	l.opened()
	return l, nil
}

// opened ends Open and Create.
func (l *Log) opened() {
	if l.flushT {
		l.wmu.lastFlushMs = l.nowMs()
	}
}

// newLog is the Log of dir with cfg, before its segments are loaded or created.
func newLog(dir string, cfg Config) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: vfs.Or(cfg.FS), w: cfg.Writer, nowMs: cfg.NowMs, flushT: cfg.FlushMs != math.MaxInt64, cache: cfg.cache}
	l.gc.commit = l.commit
	l.flushJob = func() {
		l.flushQueued.Store(false)
		_ = l.flushRolled() // an fsync failure poisoned the Log: its next call reports it
	}
	l.dropJob = func() {
		l.dropQueued.Store(false)
		l.dropBehind()
	}
	if l.cache == nil {
		l.cache = sealedFiles
	}
	l.active = cfg.active
	if l.active == nil {
		l.active = activeFiles
	}
	if l.w == nil {
		l.w = PwritevWriter{}
	}
	if s, ok := l.w.(Syncer); ok {
		l.syncer = s
	}
	if l.nowMs == nil {
		l.nowMs = func() int64 { return time.Now().UnixMilli() }
	}
	l.segBytes.Store(cfg.SegmentBytes)
	return l, nil
}

// storageErrorf describes a failed file operation of Open: an error wrapping
// kerr.KafkaStorageError, or a resource error (see IOError).
func storageErrorf(format string, args ...any) error {
	return IOError("log", fmt.Errorf(format, args...))
}

// usable returns ErrClosed or the poison error.
func (l *Log) usable() error {
	if p := l.poisoned.Load(); p != nil {
		return *p
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// fail handles the error of an operation that could not start or that it could undo (opening
// or creating a file, fsyncing the directory): a resource error (no descriptor left) is
// returned as such and leaves the Log usable; anything else poisons it.
func (l *Log) fail(op string, err error) error {
	if IsResourceError(err) {
		return l.ioError(op, err)
	}
	return l.poison(op, err)
}

// ioError describes a failed file operation that leaves the Log as it was (a read): a
// resource error, or one wrapping kerr.KafkaStorageError; the Log is not poisoned.
func (l *Log) ioError(op string, err error) error {
	return IOError(fmt.Sprintf("log %s: %s failed", l.dir, op), err)
}

// poison marks the Log failed after a write/fsync error; every later call returns the error.
func (l *Log) poison(op string, err error) error {
	perr := fmt.Errorf("log %s: %s failed, log is offline: %w: %w", l.dir, op, err, kerr.KafkaStorageError)
	if !l.poisoned.CompareAndSwap(nil, &perr) {
		return *l.poisoned.Load()
	}
	return perr
}

// SegmentBytes is the segment size in effect (segment.bytes / log.segment.bytes). Lock-free.
func (l *Log) SegmentBytes() int64 { return l.segBytes.Load() }

// Reconfigure applies a topic config change: segment.bytes (from the next roll; a batch
// larger than it is refused), retention.bytes and retention.ms (from the next
// ApplyRetention), index.interval.bytes and flush.messages / flush.ms (from the next
// append). The other fields of c are ignored (the Writer, FS and clock stay). A bad value
// is an error naming it and changes nothing.
func (l *Log) Reconfigure(c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.cfg.SegmentBytes, l.cfg.IndexIntervalBytes = c.SegmentBytes, c.IndexIntervalBytes
	l.cfg.RetentionBytes, l.cfg.RetentionMs = c.RetentionBytes, c.RetentionMs
	l.cfg.FlushMessages, l.cfg.FlushMs = c.FlushMessages, c.FlushMs
	l.segBytes.Store(c.SegmentBytes)
	if ft := c.FlushMs != math.MaxInt64; ft && !l.flushT {
		l.wmu.lastFlushMs = l.nowMs()
		l.flushT = true
	} else if !ft {
		l.flushT = false
	}
	return nil
}

// Config returns the log's current configuration.
func (l *Log) Config() Config {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.cfg
}

// Dir returns the replica directory.
func (l *Log) Dir() string { return l.dir }

// LEO returns the log end offset: the offset the next appended record gets (exclusive end).
// Lock-free; published after the bytes below it are written.
func (l *Log) LEO() int64 { return l.leo.Load() }

// EpochStart says that the batch at StartOffset (inclusive) is the first of the log whose
// partitionLeaderEpoch is Epoch or more.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// EpochStartsAtOpen returns where the batches' partitionLeaderEpoch rose in the log as Open
// recovered it (every batch header is read then): for each batch whose epoch exceeds every
// earlier batch's, its epoch and base offset, ascending in both; batches of epoch -1 are
// skipped. Later truncations drop the rises of the batches they remove; later appends add
// none. The leader epoch cache repairs itself from it when its checkpoint lags the log
// (core/partition). Safe for concurrent use; the result is the caller's.
func (l *Log) EpochStartsAtOpen() []EpochStart {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return slices.Clone(l.openEpochs)
}

// LogStart returns the first offset in the log (inclusive).
func (l *Log) LogStart() int64 { return l.logStart.Load() }

// Size returns the bytes in all segments.
func (l *Log) Size() int64 { return l.size.Load() }

// Segments returns the number of segments (including the active one).
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.segs)
}

// Close flushes (fsync data and indexes, persist the recovery point) and closes the Log; open
// Slices stay valid until released. A second Close returns nil. Closing a poisoned Log closes
// its files without flushing and returns nil.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var err error
	if l.poisoned.Load() == nil {
		err = l.flushLocked()
	}
	l.shut()
	return err
}

// Abandon closes the Log without writing anything, as a killed process would: no fsync, no
// index or recovery-point write; the files keep what the page cache has. Later calls fail
// with ErrClosed; open Slices stay valid until released. A no-op on a closed Log.
func (l *Log) Abandon() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.closed.Load() {
		l.shut()
	}
}

// shut closes every segment and marks the Log closed (wmu held). Pending roll flushes are
// dropped.
func (l *Log) shut() {
	l.idxMu.Lock() // a roll flush in flight writes no index after this
	l.closed.Store(true)
	l.idxMu.Unlock()
	l.mu.Lock()
	segs := l.mu.segs
	l.mu.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.retire()
		s.w = nil
	}
	for _, r := range l.wmu.rolled {
		r.h.unref()
	}
	clear(l.wmu.rolled)
	l.wmu.rolled = l.wmu.rolled[:0]
	l.rollFlush.Store(false)
}
