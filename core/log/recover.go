package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// scanSegment rebuilds s's batch table from its file with w: headers only for batches ending
// at or below checkFrom, header and CRC for the others. It stops at the first torn, corrupt or
// non-contiguous batch and returns why it stopped ("" at a clean end); s.size is then the
// byte position of the valid end.
func scanSegment(s *segment, f vfs.File, fileSize, checkFrom int64, w *SegmentWalker, rises *[]EpochStart) (reason string, err error) {
	w.reset(f, filepath.Base(s.logPath), fileSize, s.base)
	w.SkipCRCBelow(checkFrom)
	end, next := int64(0), s.base
	for w.Next() {
		b := w.Batch()
		if b.Err != nil {
			reason = b.Err.Error()
			break
		}
		s.entries = append(s.entries, entry{rel: uint32(b.Header.BaseOffset - s.base), pos: uint32(b.Position)})
		if e := b.Header.PartitionLeaderEpoch; e >= 0 && (len(*rises) == 0 || e > (*rises)[len(*rises)-1].Epoch) {
			*rises = append(*rises, EpochStart{Epoch: e, StartOffset: b.Header.BaseOffset})
		}
		s.maxTs = max(s.maxTs, b.Header.MaxTimestamp)
		if b.Header.IsTransactional() || b.Header.IsControl() {
			s.txnSeen = true
		}
		end, next = w.End(), w.NextOffset()
	}
	var tail *CorruptTailError
	if err := w.Err(); errors.As(err, &tail) {
		reason = tail.Error()
	} else if err != nil {
		return "", storageErrorf("%w", err)
	}
	s.size, s.next = end, next
	return reason, nil
}

// parseSegmentName returns the base offset of a NNNNNNNNNNNNNNNNNNNN<ext> file name.
func parseSegmentName(name, ext string) (int64, bool) {
	if len(name) != 20+len(ext) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	return v, err == nil
}

// recover loads the segments of l.dir (see Open).
func (l *Log) recover() (Recovery, error) {
	rec := Recovery{TruncatedAtOffset: -1}
	var reasons []string
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return rec, storageErrorf("read log dir: %w", err)
	}
	var bases []int64
	logs := map[int64]bool{}
	var indexes []int64
	txnFiles := map[int64]bool{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), deletedSuffix) {
			// Moved aside by a TruncateFullyAndStartAt that did not finish.
			if err := l.fs.Remove(filepath.Join(l.dir, e.Name())); err != nil {
				return rec, storageErrorf("remove %s: %w", e.Name(), err)
			}
			continue
		}
		if b, ok := parseSegmentName(e.Name(), ".log"); ok {
			bases = append(bases, b)
			logs[b] = true
		} else if b, ok := parseSegmentName(e.Name(), ".index"); ok {
			indexes = append(indexes, b)
		} else if b, ok := parseSegmentName(e.Name(), txnIndexExt); ok {
			txnFiles[b] = true
		}
	}
	for b := range txnFiles {
		if !logs[b] {
			if err := l.fs.Remove(filepath.Join(l.dir, segmentName(b, txnIndexExt))); err != nil {
				return rec, storageErrorf("remove orphan txnindex: %w", err)
			}
		}
	}
	for _, b := range indexes {
		if !logs[b] {
			if err := l.fs.Remove(filepath.Join(l.dir, segmentName(b, ".index"))); err != nil {
				return rec, storageErrorf("remove orphan index: %w", err)
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	rp := int64(-1)
	rpPath := filepath.Join(l.dir, RecoveryPointFile)
	if v, lines, err := ReadCheckpoint(l.fs, rpPath); err != nil || (lines != nil && (v != 0 || len(lines) != 1)) {
		reasons = append(reasons, fmt.Sprintf("recovery-point checkpoint unusable (%v, version %d, %d lines): checking every batch", err, v, len(lines)))
	} else if len(lines) == 1 {
		if rp, err = strconv.ParseInt(lines[0], 10, 64); err != nil || rp < 0 {
			reasons = append(reasons, fmt.Sprintf("recovery-point %q is not an offset: checking every batch", lines[0]))
			rp = -1
		}
	}
	l.wmu.recoveryPoint = rp
	ckptStart, why := l.readLogStartCheckpoint()
	if why != "" {
		reasons = append(reasons, why)
	}
	l.wmu.logStartCkpt = ckptStart

	if len(bases) == 0 {
		s, err := l.createSegment(0)
		if err != nil {
			return rec, storageErrorf("%w", err)
		}
		l.mu.segs = []*segment{s}
		rec.Segments = 1
		if err := l.fs.SyncDir(l.dir); err != nil {
			return rec, storageErrorf("fsync dir %s: %w", l.dir, err)
		}
		if err := l.persistLogStartLocked(); err != nil { // a stale log-start checkpoint goes
			return rec, err
		}
		if rp == 0 || rp == -1 {
			// A new log: a missing recovery point already means "check every batch", so
			// there is nothing to write (one file creation fewer per replica of a new topic).
			l.wmu.recoveryPoint = 0
			return rec, nil
		}
		if err := l.setRecoveryPoint(0); err != nil {
			return rec, err
		}
		return rec, nil
	}
	checkFrom := rp
	if checkFrom < 0 {
		checkFrom = bases[0]
	}
	sc := &SegmentWalker{}
	var size int64
	cut := false
	expect := int64(-1)
	for _, base := range bases {
		logPath := filepath.Join(l.dir, segmentName(base, ".log"))
		idxPath := filepath.Join(l.dir, segmentName(base, ".index"))
		if !cut && expect >= 0 && base != expect {
			cut = true
			rec.TruncatedAtOffset = expect
			reasons = append(reasons, fmt.Sprintf("segment %s starts at offset %d but the previous segment ends at %d: deleting it and later segments", filepath.Base(logPath), base, expect))
		}
		if cut {
			if st, err := l.fs.Stat(logPath); err == nil {
				rec.TruncatedBytes += st.Size()
			}
			if err := l.fs.Remove(logPath); err != nil {
				return rec, storageErrorf("delete segment after corruption: %w", err)
			}
			if err := l.fs.Remove(idxPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return rec, storageErrorf("delete index after corruption: %w", err)
			}
			if err := l.fs.Remove(filepath.Join(l.dir, segmentName(base, txnIndexExt))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return rec, storageErrorf("delete txnindex after corruption: %w", err)
			}
			continue
		}
		s := l.newSegment(base)
		_, statErr := l.fs.Stat(idxPath)
		idxMissing := errors.Is(statErr, os.ErrNotExist)
		f, err := l.fs.OpenFile(logPath, os.O_RDWR, 0)
		if err != nil {
			return rec, storageErrorf("open segment: %w", err)
		}
		s.hold(f)
		if n := len(l.mu.segs); n > 0 {
			// Not the last segment after all: sealed, its file may be closed.
			l.mu.segs[n-1].w = nil
			l.mu.segs[n-1].seal()
		}
		l.mu.segs = append(l.mu.segs, s)
		st, err := f.Stat()
		if err != nil {
			return rec, storageErrorf("stat segment: %w", err)
		}
		fileSize := st.Size()
		reason, err := scanSegment(s, f, fileSize, checkFrom, sc, &l.openEpochs)
		if err != nil {
			return rec, err
		}
		if s.size < fileSize {
			if err := f.Truncate(s.size); err != nil {
				return rec, storageErrorf("truncate corrupt tail: %w", err)
			}
			rec.TruncatedBytes += fileSize - s.size
			rec.TruncatedAtOffset = s.next
			reasons = append(reasons, fmt.Sprintf("%s: truncated %d bytes at offset %d", reason, fileSize-s.size, s.next))
			cut = true
		}
		why := ""
		if idxMissing {
			// Created with its first entry (createSegment): none is due yet when the sparse
			// rule gives none for these batches, else the index is rebuilt.
			s.index, s.bytesSinceIdx = s.index[:0], 0
			for i, e := range s.entries {
				s.addIndex(e, s.endAt(i)-int64(e.pos), l.cfg.IndexIntervalBytes)
			}
			if len(s.index) > 0 {
				why = fmt.Sprintf("index %s missing", filepath.Base(idxPath))
			}
		} else if why, err = s.loadIndex(); err != nil {
			return rec, storageErrorf("%w", err)
		}
		if why != "" {
			if err := s.rebuildIndex(l.cfg.IndexIntervalBytes); err != nil {
				return rec, storageErrorf("%w", err)
			}
			rec.IndexesRebuilt++
			reasons = append(reasons, why+": rebuilt")
		}
		// Verified up to its end: make it durable (the recovery point moves past it below).
		if s.next > rp || rp < 0 {
			if err := l.fsync(f); err != nil {
				return rec, storageErrorf("fsync recovered segment %s: %w", s.logPath, err)
			}
		}
		s.synced = s.size
		s.ours.Store(s.size)
		if checkFrom <= s.base {
			s.checked.Store(s.size) // every batch was CRC-checked above
		}
		size += s.size
		expect = s.next
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return rec, storageErrorf("fsync dir %s: %w", l.dir, err)
	}
	last := l.mu.segs[len(l.mu.segs)-1]
	l.leo.Store(last.next)
	l.logStart.Store(l.mu.segs[0].base)
	l.size.Store(size)
	rec.Segments = len(l.mu.segs)
	rec.RecoveredFrom = min(max(checkFrom, l.mu.segs[0].base), last.next)
	rec.Reason = strings.Join(reasons, "; ")
	if err := l.setRecoveryPoint(last.next); err != nil {
		return rec, err
	}
	restored, err := l.restoreLogStart(ckptStart)
	if restored != "" {
		reasons = append(reasons, restored)
		rec.Reason = strings.Join(reasons, "; ")
		rec.Segments = len(l.mu.segs)
	}
	if err != nil {
		return rec, err
	}
	n, whys, err := l.checkTxnIndexes(txnFiles)
	if n > 0 {
		rec.TxnIndexesRebuilt = n
		reasons = append(reasons, whys...)
		rec.Reason = strings.Join(reasons, "; ")
	}
	if err != nil {
		return rec, storageErrorf("check txnindex: %w", err)
	}
	return rec, nil
}
