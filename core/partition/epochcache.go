package partition

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// EpochCheckpointFile is the name of the leader epoch checkpoint in a replica
// directory (Kafka's LeaderEpochCheckpointFile).
const EpochCheckpointFile = "leader-epoch-checkpoint"

// epochCheckpointVersion is the only version of the file format:
//
//	0                  <- version
//	2                  <- number of entries
//	0 0                <- "epoch startOffset", ascending in both
//	3 1500
const epochCheckpointVersion = 0

// EpochEntry says that leader epoch Epoch wrote its first record at
// StartOffset (inclusive).
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochCache is Kafka's LeaderEpochFileCache: for each leader epoch the
// offset of its first record, ascending in epoch and in start offset. The
// end of an epoch (exclusive) is the start offset of the next epoch, or the
// log end offset for the latest epoch.
//
// All methods are safe for concurrent use (one mutex: the cache is touched on
// leader changes, on follower appends that carry a new epoch, on truncation
// and on OffsetForLeaderEpoch requests, never on the produce/ack path).
//
// A cache with a non-empty path writes its checkpoint file on every change, in two ways
// (Kafka 3.7's LeaderEpochFileCache, KAFKA-15046, likewise keeps the fsync off the append
// path):
//   - Assign (a new epoch: a leader's election, a follower's first batch of an epoch) replaces
//     the file without fsync: a follower's first append to each of thousands of new
//     partitions would otherwise cost two fsyncs each. A crash may lose such a write; the
//     entries it held are restored when the replica is opened, from where the batches'
//     partitionLeaderEpoch rises in the recovered log (repairFromLog), as Kafka's log
//     recovery reassigns each recovered batch's epoch.
//   - the truncations (TruncateFromEnd, TruncateFromStart, Clear) replace it durably (fsync,
//     rename, directory fsync) before they return: an entry a lost truncation left behind
//     could not be told from a true one, whereas Assign only ever appends entries at or
//     past the last one, which the log's batches can restore.
//
// With a later function (Config.EpochCheckpointLater, isrbench.leader.epoch.checkpoint.async)
// Assign does not even write the file: it hands the write to later's goroutine and returns.
// The same repair covers it: a write a process crash (kill -9) loses before it ran is one
// that a machine crash could lose already. Many writes queued for one cache are one write
// (of the entries at the time it runs). Close writes what is still pending and ends the
// cache's writes: a write queued for a replica deleted meanwhile never touches a directory
// (nor the one a new incarnation of its topic made).
type EpochCache struct {
	mu      sync.Mutex
	fs      vfs.FS
	path    string // "" = in memory only
	entries []EpochEntry
	// stale: the last checkpoint write failed (a resource error: no descriptor left), so the
	// file lags entries; the next call that could change it writes it (durably) even if it
	// changes nothing.
	stale bool
	// later queues an Assign's write (nil: Assign writes at once); it must not run the job
	// before it returns, and returns false when it cannot take it (the write is made at once).
	later func(write func() error) bool
	// dirty: entries changed since the file was last written; queued: a write is queued
	// (later); closed: Close ran, nothing is written any more.
	dirty, queued, closed bool
}

// NewEpochCache returns an empty cache that is never persisted.
func NewEpochCache() *EpochCache { return &EpochCache{} }

// LoadEpochCache reads dir/leader-epoch-checkpoint (a missing file is an
// empty cache) and returns a cache that writes its changes back there.
func LoadEpochCache(fs vfs.FS, dir string) (*EpochCache, error) {
	path := epochPath(dir)
	fs = vfs.Or(fs)
	version, lines, err := log.ReadCheckpoint(fs, path)
	if err != nil {
		return nil, err
	}
	c := &EpochCache{fs: fs, path: path}
	if lines == nil && version == 0 {
		return c, nil
	}
	entries, err := parseEpochLines(version, lines)
	if err != nil {
		return nil, fmt.Errorf("leader epoch checkpoint %s: %w", path, err)
	}
	c.entries = entries
	return c, nil
}

func epochPath(dir string) string { return filepath.Join(dir, EpochCheckpointFile) }

func parseEpochLines(version int, lines []string) ([]EpochEntry, error) {
	if version != epochCheckpointVersion {
		return nil, fmt.Errorf("unsupported version %d (want %d)", version, epochCheckpointVersion)
	}
	entries := make([]EpochEntry, 0, len(lines))
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("entry %d %q: want \"epoch startOffset\"", i, line)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("entry %d %q: epoch and start offset must be non-negative integers", i, line)
		}
		if n := len(entries); n > 0 && (int32(e) <= entries[n-1].Epoch || o < entries[n-1].StartOffset) {
			return nil, fmt.Errorf("entry %d %q: epochs must increase and start offsets must not decrease", i, line)
		}
		entries = append(entries, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	return entries, nil
}

// Entries returns a copy of the cache, ascending.
func (c *EpochCache) Entries() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]EpochEntry(nil), c.entries...)
}

// Latest returns the latest epoch, or UndefinedEpoch when empty.
func (c *EpochCache) Latest() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// EpochOf returns the epoch of the record at offset (inclusive): the epoch of the last entry
// starting at or before it, or UndefinedEpoch when none does (Kafka's epochForOffset).
func (c *EpochCache) EpochOf(offset int64) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := UndefinedEpoch
	for _, en := range c.entries {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}

// StartOffsetOf returns the start offset (inclusive) of epoch, or -1 if the
// cache has no entry for exactly that epoch.
func (c *EpochCache) StartOffsetOf(epoch int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.Epoch == epoch {
			return e.StartOffset
		}
	}
	return -1
}

// Assign records that epoch starts at startOffset (inclusive) and reports
// whether the cache changed. The cache stays monotonic:
//   - an epoch below the latest is stale and ignored;
//   - the latest epoch again with a start offset >= its recorded one is a
//     no-op (every batch of an epoch calls Assign);
//   - otherwise entries that would break monotonicity (an epoch >= epoch or
//     a start offset >= startOffset) are removed first, as Kafka's
//     maybeTruncateNonMonotonicEntries does.
//
// Negative arguments are ignored (batches of old formats carry epoch -1).
// A failed checkpoint write is returned; the in-memory cache is updated anyway.
func (c *EpochCache) Assign(epoch int32, startOffset int64) (bool, error) {
	if epoch < 0 || startOffset < 0 {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assignLocked(epoch, startOffset) {
		return false, c.flushStaleLocked()
	}
	if c.later != nil && c.path != "" && !c.stale {
		c.dirty = true
		if c.queued {
			return true, nil // the queued write takes this entry too
		}
		if c.later(c.writeQueued) {
			c.queued = true
			return true, nil
		}
	}
	return true, c.flushLocked(false)
}

// writeQueued is the write Assign queued: the entries as they are now, unless a write since
// (a truncation's) or Close made it moot. Its error (a failed write: the cache is stale, and
// its next change writes the file durably) is the queue's to report.
func (c *EpochCache) writeQueued() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued = false
	if !c.dirty {
		return nil
	}
	return c.flushLocked(false)
}

// Close writes the checkpoint durably if a queued write has not written it yet (a clean
// stop leaves it as the replica's other files: fsynced, or held for the broker's syncfs),
// and ends the cache's file writes (its replica is closed, and its directory may be removed
// next); later calls change only the cache in memory.
func (c *EpochCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.dirty {
		err = c.flushLocked(true)
	}
	c.closed = true
	return err
}

// abandon ends the cache's file writes without writing what is pending (a killed broker's:
// a write still queued must not land in files a new incarnation has opened).
func (c *EpochCache) abandon() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// assignLocked is Assign in memory: it reports whether the entries changed (c.mu held).
func (c *EpochCache) assignLocked(epoch int32, startOffset int64) bool {
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if epoch < last.Epoch || (epoch == last.Epoch && startOffset >= last.StartOffset) {
			return false
		}
	}
	for n := len(c.entries); n > 0; n-- {
		last := c.entries[n-1]
		if last.Epoch < epoch && last.StartOffset < startOffset {
			break
		}
		c.entries = c.entries[:n-1]
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return true
}

// repairFromLog restores what a lost Assign write took from the loaded checkpoint: it replays
// rises (where the recovered log's batch epochs rise, log.Log.EpochStartsAtOpen) as a
// follower's appends would have assigned them, each at no lower offset than from, the start
// of the last loaded entry (or logStart when the cache is empty). Every write lost in a crash
// was an Assign, made after the loaded version of the file, of an entry at or past its last
// one, so nothing below from is touched; an epoch that began below the log start (an empty
// cache) gets an entry at the log start, as Kafka's truncateFromStart leaves it. Call it
// after TruncateFromEnd(LEO) has dropped the entries of records the crash lost. It returns
// how many entries it added or moved (0: the checkpoint was up to date) and the error of
// writing the repaired checkpoint (without fsync: a crash before it is flushed repairs it
// again).
func (c *EpochCache) repairFromLog(rises []log.EpochStart, logStart int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from := logStart
	if n := len(c.entries); n > 0 {
		from = c.entries[n-1].StartOffset
	}
	changed := 0
	for _, r := range rises {
		if r.Epoch >= 0 && c.assignLocked(r.Epoch, max(r.StartOffset, from)) {
			changed++
		}
	}
	if changed == 0 {
		return 0, nil
	}
	return changed, c.flushLocked(false)
}

// EndOffsetFor answers OffsetForLeaderEpoch for requested, given the log end
// offset leo (exclusive), with Kafka's semantics: the largest epoch <=
// requested and its end offset (exclusive: the start offset of the next
// larger epoch, or leo when it is the latest epoch). A requested epoch older
// than every entry answers (requested, start offset of the first entry).
// UNDEFINED (-1, -1) when requested is undefined, the cache is empty or
// requested is newer than the latest epoch.
func (c *EpochCache) EndOffsetFor(requested int32, leo int64) (int32, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if requested == UndefinedEpoch || len(c.entries) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	n := len(c.entries)
	if c.entries[n-1].Epoch == requested {
		return requested, leo
	}
	// higher = first entry with Epoch > requested.
	higher := -1
	for i, e := range c.entries {
		if e.Epoch > requested {
			higher = i
			break
		}
	}
	switch higher {
	case -1:
		return UndefinedEpoch, UndefinedEpochOffset
	case 0:
		return requested, c.entries[0].StartOffset
	default:
		return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
	}
}

// TruncateFromEnd removes every entry whose start offset is >= offset
// (exclusive end of the truncated log).
func (c *EpochCache) TruncateFromEnd(offset int64) error {
	if offset < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	if n == len(c.entries) {
		return c.flushStaleLocked()
	}
	c.entries = c.entries[:n]
	return c.flushLocked(true)
}

// TruncateFromStart drops the epochs wholly below the new log start offset
// (inclusive) after retention: entries starting at or below offset are
// removed and the last of them is kept with its start moved to offset.
func (c *EpochCache) TruncateFromStart(offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= offset {
		i++
	}
	if i == 0 || (i == 1 && c.entries[0].StartOffset == offset) {
		return c.flushStaleLocked()
	}
	kept := EpochEntry{Epoch: c.entries[i-1].Epoch, StartOffset: offset}
	c.entries = append([]EpochEntry{kept}, c.entries[i:]...)
	return c.flushLocked(true)
}

// Clear removes every entry (a follower that starts over from the leader's
// log start offset).
func (c *EpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return c.flushStaleLocked()
	}
	c.entries = nil
	return c.flushLocked(true)
}

// flushStaleLocked writes the checkpoint (durably) when an earlier write failed.
func (c *EpochCache) flushStaleLocked() error {
	if !c.stale {
		return nil
	}
	return c.flushLocked(true)
}

// flushLocked writes the checkpoint: durable (fsynced, see log.WriteCheckpoint) or not
// (log.WriteCheckpointNoSync, for Assign; see EpochCache). A failure for want of a descriptor
// is a resource error (log.IsResourceError, the log directory stays online); any other wraps
// kerr.KafkaStorageError.
func (c *EpochCache) flushLocked(durable bool) error {
	if c.path == "" || c.closed {
		return nil
	}
	lines := make([]string, len(c.entries))
	for i, e := range c.entries {
		lines[i] = strconv.FormatInt(int64(e.Epoch), 10) + " " + strconv.FormatInt(e.StartOffset, 10)
	}
	write := log.WriteCheckpoint
	if !durable {
		write = log.WriteCheckpointNoSync
	}
	if err := write(c.fs, c.path, epochCheckpointVersion, lines); err != nil {
		c.stale = true
		return log.IOError("leader epoch checkpoint "+c.path, err)
	}
	c.stale, c.dirty = false, false
	return nil
}
