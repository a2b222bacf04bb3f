package log

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// LogStartFile is the checkpoint in a replica directory holding a log start offset that lies
// inside the first segment (Kafka keeps it in the log directory's log-start-offset-checkpoint):
// a follower's log start follows its leader's (IncrementLogStart), which need not fall on one
// of its own segment boundaries. The file exists only while the log start is above the first
// segment's base offset; otherwise the segment files say where the log starts.
const LogStartFile = "log-start-offset"

// IncrementLogStart advances the log start offset to offset when it is higher (Kafka's
// UnifiedLog.maybeIncrementLogStartOffset): from then on Read and Bytes below it fail with
// kerr.OffsetOutOfRange, and every whole segment below it is deleted at once (never the
// active one), as retention deletes them. offset may lie inside a segment (even inside a
// batch: a Read at offset still returns that whole batch); it is then persisted in
// LogStartFile so that Open restores it. offset above the LEO is an error wrapping
// kerr.OffsetOutOfRange and changes nothing: the caller bounds it (a follower by its HW).
// It returns how many segments it deleted.
func (l *Log) IncrementLogStart(offset int64) (deletedSegments int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	if offset <= l.logStart.Load() {
		return 0, nil
	}
	if leo := l.leo.Load(); offset > leo {
		return 0, fmt.Errorf("log %s: log start %d past the LEO %d: %w", l.dir, offset, leo, kerr.OffsetOutOfRange)
	}
	if err := l.beforeLogStartLocked(offset); err != nil {
		return 0, err
	}
	var removed []*segment
	l.mu.Lock()
	for len(l.mu.segs) > 1 && l.mu.segs[1].base <= offset {
		removed = append(removed, l.mu.segs[0])
		l.mu.segs[0] = nil
		l.mu.segs = l.mu.segs[1:]
	}
	l.logStart.Store(offset)
	l.mu.Unlock()
	for _, s := range removed {
		l.size.Add(-s.size)
		if err := s.remove(l.fs); err != nil {
			return deletedSegments, l.poison("log start delete", err)
		}
		deletedSegments++
	}
	return deletedSegments, l.persistLogStartLocked()
}

// setLogStartLocked sets the log start (wmu held; every change of it and of segs takes mu
// too, so Read sees the two consistent).
func (l *Log) setLogStartLocked(offset int64) {
	l.mu.Lock()
	l.logStart.Store(offset)
	l.mu.Unlock()
}

// persistLogStartLocked brings LogStartFile in line with the log start (wmu held): it holds
// the log start while that lies above the first segment's base offset, and is removed (the
// directory fsynced, so a crash cannot bring a stale value back) once it does not.
func (l *Log) persistLogStartLocked() error {
	want := int64(-1)
	if start := l.logStart.Load(); start > l.mu.segs[0].base {
		want = start
	}
	if want == l.wmu.logStartCkpt {
		return nil
	}
	path := filepath.Join(l.dir, LogStartFile)
	if want < 0 {
		if err := l.fs.Remove(path); err != nil && !os.IsNotExist(err) {
			return l.poison("log-start checkpoint", err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.poison("log-start checkpoint", err)
		}
	} else if err := WriteCheckpoint(l.fs, path, 0, []string{strconv.FormatInt(want, 10)}); err != nil {
		return l.poison("log-start checkpoint", err)
	}
	l.wmu.logStartCkpt = want
	return nil
}

// readLogStartCheckpoint returns the offset LogStartFile holds: -1 when there is none, -2
// (with why) when it cannot be used (it is then removed by the next persistLogStartLocked).
func (l *Log) readLogStartCheckpoint() (offset int64, why string) {
	path := filepath.Join(l.dir, LogStartFile)
	v, lines, err := ReadCheckpoint(l.fs, path)
	switch {
	case err != nil || (lines != nil && (v != 0 || len(lines) != 1)):
		return -2, fmt.Sprintf("log-start checkpoint unusable (%v, version %d, %d lines): ignored", err, v, len(lines))
	case len(lines) == 0:
		return -1, ""
	}
	off, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil || off < 0 {
		return -2, fmt.Sprintf("log-start checkpoint %q is not an offset: ignored", lines[0])
	}
	return off, ""
}

// restoreLogStart applies the log start ckpt read from LogStartFile (-1 none) once the
// segments are loaded (Open). A log start inside the first segment is restored; one at or
// below it is stale and its file removed. One past the recovered LEO (the tail it covered was
// lost) empties the log and restarts it there, as Kafka's LogLoader does when the log start
// checkpoint is past the log end: it returns why then.
func (l *Log) restoreLogStart(ckpt int64) (why string, err error) {
	switch leo := l.leo.Load(); {
	case ckpt > leo:
		why = fmt.Sprintf("log-start checkpoint %d past the recovered LEO %d: log restarted empty at %d", ckpt, leo, ckpt)
		return why, l.truncateFullyLocked(ckpt)
	case ckpt > l.mu.segs[0].base:
		l.setLogStartLocked(ckpt)
	}
	return "", l.persistLogStartLocked()
}
