package log

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/isrbench/isrbench/core/vfs"
)

// Config is a Log's configuration, with Kafka's topic/broker config names. A plain value:
// copy it freely; Open takes a copy and never modifies it.
type Config struct {
	SegmentBytes       int64  // log.segment.bytes: roll the active segment before it exceeds this; default 1 GiB, range [14, 2^31-1]
	IndexIntervalBytes int    // log.index.interval.bytes: bytes between sparse .index entries; default 4096, >= 0
	RetentionBytes     int64  // retention.bytes: delete oldest segments while the log exceeds this; default -1 (unlimited)
	RetentionMs        int64  // retention.ms: delete segments whose newest timestamp is older; default 604800000 (7 days), -1 unlimited
	FlushMessages      int64  // flush.messages: fsync after this many unflushed records; default math.MaxInt64 (never on count), >= 1
	FlushMs            int64  // flush.ms: fsync (checked at append) when this long passed since the last fsync; default math.MaxInt64, >= 0
	Writer             Writer // isrbench.io: the write path; nil = pwritev (one pwritev per Append call)
	// TailBytes is isrbench.log.tail.bytes: the newest bytes of the active segment kept in
	// memory (up to two 32 KiB chunks more) once a read asks for them, from which Slice.ReadAll copies instead of
	// reading the file (tail.go); default 1 MiB, 0 = off (pread always).
	TailBytes int64
	// DropBehindBytes is isrbench.log.drop.behind.bytes: about how many of the active
	// segment's newest bytes stay in the page cache; older ones are handed to the disk and
	// dropped from it, and a sealed segment is dropped after its roll flush (dropbehind.go);
	// default 8 MiB, 0 = off (the kernel decides, as in Kafka).
	DropBehindBytes int64
	// DropBehindWait is isrbench.log.drop.behind.wait: a drop-behind step waits until the
	// bytes it hands to the disk are written, and where RollFlush is set the steps of every
	// Log of the process run one at a time on one goroutine (dropbehind.go); default true.
	// false: a step only starts the writeback, on the background flushers, so replicas that
	// cross a step together hand their bytes to the disk at the same moment.
	DropBehindWait bool
	FS             vfs.FS // the file system; nil = vfs.OS (tests and the simulator use a vfs.MemFS)

	// NowMs is the wall clock in ms used for flush.ms; nil = time.Now().UnixMilli(). Tests inject it.
	NowMs func() int64

	// RollFlush runs the flush of the segments a roll sealed (fsync of their .log and .index
	// and of the directory, then the recovery point; Kafka's "flush-log" task, which its roll
	// schedules on a background thread): nil = in the goroutine of the Append that rolled,
	// after its group commit (deterministic: the simulator's choice); FlushInBackground =
	// on the process's background flushers, as brokers do, so that no produce waits for it.
	RollFlush func(job func())

	// OnDamage is called (from the reading or scrubbing goroutine) with every damaged batch
	// that Read or Scrub finds in bytes this process did not write: see DamageError. nil =
	// not reported (Read still refuses to serve it).
	OnDamage func(DamageError)

	cache  *fileCache // the cache of open sealed segment files; nil = the process's (tests set their own)
	active *fileCache // the cache of open active segment files; nil = the process's (tests set their own)
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		IndexIntervalBytes: 4096,
		RetentionBytes:     -1,
		RetentionMs:        604800000,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		TailBytes:          DefaultTailBytes,
		DropBehindBytes:    DefaultDropBehindBytes,
		DropBehindWait:     true,
	}
}

// DefaultTailBytes is isrbench.log.tail.bytes' default (Config.TailBytes).
const DefaultTailBytes = 1 << 20

// DefaultDropBehindBytes is isrbench.log.drop.behind.bytes' default (Config.DropBehindBytes).
const DefaultDropBehindBytes = 8 << 20

// minSegmentBytes is Kafka's lower bound for log.segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0).
const minSegmentBytes = 14

func (c Config) validate() error {
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return configErrorf("log.segment.bytes %d out of range [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.IndexIntervalBytes < 0:
		return configErrorf("log.index.interval.bytes %d must be >= 0", c.IndexIntervalBytes)
	case c.RetentionBytes < -1:
		return configErrorf("retention.bytes %d must be >= -1 (-1 = unlimited)", c.RetentionBytes)
	case c.RetentionMs < -1:
		return configErrorf("retention.ms %d must be >= -1 (-1 = unlimited)", c.RetentionMs)
	case c.FlushMessages < 1:
		return configErrorf("flush.messages %d must be >= 1", c.FlushMessages)
	case c.FlushMs < 0:
		return configErrorf("flush.ms %d must be >= 0", c.FlushMs)
	case c.TailBytes < 0 || c.TailBytes > math.MaxInt32:
		return configErrorf("isrbench.log.tail.bytes %d out of range [0, %d] (0 = off)", c.TailBytes, math.MaxInt32)
	case c.DropBehindBytes < 0 || c.DropBehindBytes > math.MaxInt32:
		return configErrorf("isrbench.log.drop.behind.bytes %d out of range [0, %d] (0 = off)", c.DropBehindBytes, math.MaxInt32)
	}
	return nil
}

// Writer is the write path: one WriteAt writes bufs contiguously at off in f, in one syscall or
// one io_uring submission where the implementation can, and returns an error unless every byte
// was written. Implementations must be safe for concurrent use (a Writer may be shared by many
// Logs); a Log calls it from one goroutine at a time.
type Writer interface {
	Name() string
	WriteAt(f *os.File, off int64, bufs [][]byte) error
}

// Syncer is optionally implemented by a Writer to replace f.Sync() for fsync (io_uring's
// IORING_OP_FSYNC, or an error-injecting test writer).
type Syncer interface {
	Fsync(f *os.File) error
}

// AppendInfo describes what one Append wrote. A plain value.
type AppendInfo struct {
	FirstOffset, LastOffset int64 // offsets of the first and last record written, both inclusive
	Records                 int64 // sum of the batches' recordsCount
	Batches                 int
	Bytes                   int64
	MaxTimestamp            int64 // largest batch maxTimestamp (ms)
	LeaderEpoch             int32 // leader appends: the partitionLeaderEpoch the batches were stamped with
}

// Slice is a byte range [Pos, Pos+Size) of one segment file holding whole batches with offsets
// [FirstOffset, NextOffset), for sendfile. The file stays open until every Slice on it is
// released, even if retention or truncation removes the segment meanwhile, the segment is
// sealed and its file evicted from the cache of open sealed files, or the Log is closed. Call Release exactly
// once (a Size 0 Slice holds nothing and Release is a no-op). A Slice may be read from any
// goroutine; its fields must not be modified.
//
// A TruncateTo that cuts into the bytes of a live Slice (a follower truncating below data it
// is still serving) leaves the Slice pointing at shortened or rewritten bytes; readers of such
// a Slice see a short read (ReadAll error) or batches that fail their consumer's validation.
type Slice struct {
	File        vfs.File
	Pos         int64
	Size        int64
	FirstOffset int64 // base offset of the first batch, inclusive
	NextOffset  int64 // offset after the last batch, exclusive

	h   *segFile
	mem *tail // the segment's in-memory tail (nil: none)
}

// Release drops the Slice's reference on its segment file.
func (s Slice) Release() {
	if s.h != nil {
		s.h.unref()
	}
}

// ReadAll appends the Slice's bytes to dst (the copy path: small fetch slices, tests, tools)
// and returns the extended slice: from the segment's in-memory tail when it holds them
// (isrbench.log.tail.bytes), else with pread. A short read is an error wrapping
// io.ErrUnexpectedEOF.
func (s Slice) ReadAll(dst []byte) ([]byte, error) {
	if s.Size == 0 {
		return dst, nil
	}
	if b, ok := s.mem.appendTo(dst, s.Pos, s.Size); ok {
		return b, nil
	}
	start := len(dst)
	need := start + int(s.Size)
	if cap(dst) < need {
		nd := make([]byte, start, need)
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:need]
	n, err := s.File.ReadAt(dst[start:], s.Pos)
	if n < int(s.Size) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return dst[:start+n], fmt.Errorf("log: read %d of %d bytes at position %d of %s: %w", n, s.Size, s.Pos, s.File.Name(), err)
	}
	return dst, nil
}

// Recovery reports what Open found and repaired. A plain value.
type Recovery struct {
	Segments          int    // segments in the log after recovery
	RecoveredFrom     int64  // offset from which batches were CRC-checked (the recovery point); before it only headers were scanned
	TruncatedBytes    int64  // bytes dropped (torn or corrupt tail, plus deleted later segments)
	TruncatedAtOffset int64  // first offset dropped (the LEO after the cut, exclusive end of what was kept); -1 if nothing was dropped
	Reason            string // why bytes were dropped or files repaired, "" if the log was clean
	IndexesRebuilt    int    // .index files rebuilt because they were missing or damaged
	TxnIndexesRebuilt int    // .txnindex files rewritten or deleted because they were missing, stale or corrupt
}

func (r Recovery) String() string {
	s := fmt.Sprintf("recovered %d segments, CRC-checked from offset %d", r.Segments, r.RecoveredFrom)
	if r.TruncatedBytes > 0 || r.TruncatedAtOffset >= 0 {
		s += fmt.Sprintf(", truncated %d bytes at offset %d", r.TruncatedBytes, r.TruncatedAtOffset)
	}
	if r.IndexesRebuilt > 0 {
		s += fmt.Sprintf(", rebuilt %d indexes", r.IndexesRebuilt)
	}
	if r.TxnIndexesRebuilt > 0 {
		s += fmt.Sprintf(", rebuilt %d transaction indexes", r.TxnIndexesRebuilt)
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}
