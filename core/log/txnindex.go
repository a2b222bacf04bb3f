package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// The aborted-transactions index, Kafka's TransactionIndex: per segment, a file
// NNNNNNNNNNNNNNNNNNNN.txnindex of fixed-size entries, one per ABORT marker of that segment,
// in marker order (see doc.go for the layout). It is created by the segment's first entry
// (most segments have none and never get the file), cut by TruncateTo, deleted with its
// segment, and opened only for the moment it is written or read, so it costs no descriptor
// while idle. It is derived data: Open checks it against the segment's control batches and
// rewrites a missing, stale or corrupt one.

// txnIndexExt ends a segment's aborted-transactions index file name.
const txnIndexExt = ".txnindex"

// TxnIndexEntrySize is the size of one .txnindex entry: version int16, producer id, first
// offset, last offset and last stable offset (int64 each), big-endian.
const TxnIndexEntrySize = 34

// txnIndexVersion is the only entry version (Kafka's AbortedTxn.CurrentVersion).
const txnIndexVersion = 0

// AbortedTxn is one .txnindex entry: the producer id of an aborted transaction, the offset of
// its first record and of its ABORT marker (both inclusive), and the last stable offset right
// after the marker (exclusive: the first offset of the earliest other transaction still open
// then, or LastOffset+1; so at most LastOffset+1), which lets a reader stop early: no later
// entry starts below it (Kafka's AbortedTxn). A plain value.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// AppendTxnIndexEntry appends a's 34-byte encoding to dst.
func AppendTxnIndexEntry(dst []byte, a AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.LastStableOffset))
}

// DecodeTxnIndex decodes the bytes of a .txnindex file, checking what a valid file holds: a
// whole number of entries of version 0, each with a producer id >= 0, 0 <= FirstOffset <=
// LastOffset and 0 <= LastStableOffset <= LastOffset+1, in strictly increasing LastOffset order. The
// error names the entry and what is wrong.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%TxnIndexEntrySize != 0 {
		return nil, fmt.Errorf("txnindex size %d is not a multiple of %d", len(b), TxnIndexEntrySize)
	}
	out := make([]AbortedTxn, 0, len(b)/TxnIndexEntrySize)
	for p := 0; p < len(b); p += TxnIndexEntrySize {
		e := b[p : p+TxnIndexEntrySize]
		if v := binary.BigEndian.Uint16(e); v != txnIndexVersion {
			return nil, fmt.Errorf("txnindex entry %d: version %d (want %d)", p/TxnIndexEntrySize, v, txnIndexVersion)
		}
		a := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(e[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(e[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(e[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(e[26:])),
		}
		switch {
		case a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1:
			return nil, fmt.Errorf("txnindex entry %d: producer id %d, first offset %d, last offset %d, last stable offset %d (want id >= 0, 0 <= first <= last, 0 <= lso <= last+1)",
				p/TxnIndexEntrySize, a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
		case len(out) > 0 && a.LastOffset <= out[len(out)-1].LastOffset:
			return nil, fmt.Errorf("txnindex entry %d: last offset %d not above the previous entry's %d", p/TxnIndexEntrySize, a.LastOffset, out[len(out)-1].LastOffset)
		}
		out = append(out, a)
	}
	return out, nil
}

// readTxnFile reads and decodes the segment's .txnindex (txnMu held). A missing file is empty.
func (s *segment) readTxnFile(fs vfs.FS) ([]AbortedTxn, error) {
	f, err := fs.OpenFile(s.txnPath, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log: open txnindex %s: %w", s.txnPath, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("log: stat txnindex %s: %w", s.txnPath, err)
	}
	b := make([]byte, st.Size())
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("log: read txnindex %s: %d of %d bytes: %w", s.txnPath, n, len(b), err)
	}
	out, err := DecodeTxnIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(s.txnPath), err)
	}
	return out, nil
}

// writeTxnFile replaces the segment's .txnindex with ents (none: the file goes), fsynced
// (txnMu held).
func (s *segment) writeTxnFile(fs vfs.FS, ents []AbortedTxn) error {
	if len(ents) == 0 {
		if err := fs.Remove(s.txnPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("log: delete txnindex %s: %w", s.txnPath, err)
		}
		s.txnN, s.txnSynced, s.txnLast = 0, 0, -1
		return nil
	}
	var b []byte
	for _, a := range ents {
		b = AppendTxnIndexEntry(b, a)
	}
	f, err := fs.OpenFile(s.txnPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("log: create txnindex %s: %w", s.txnPath, err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: write txnindex %s: %w", s.txnPath, err)
	}
	s.txnN, s.txnSynced, s.txnLast = len(ents), len(ents), ents[len(ents)-1].LastOffset
	return nil
}

// syncTxnIndex fsyncs the segment's .txnindex when it holds entries not known synced: the
// roll flush, Flush and Close do, so the index is as durable as its segment. A resource error
// fails the flush, another poisons the Log.
func (l *Log) syncTxnIndex(s *segment) error {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	if s.txnGone || s.txnSynced >= s.txnN {
		return nil
	}
	f, err := l.fs.OpenFile(s.txnPath, os.O_RDWR, 0)
	if err != nil {
		return l.fail("fsync txnindex", fmt.Errorf("log: open txnindex %s: %w", s.txnPath, err))
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.poison("fsync txnindex", fmt.Errorf("log: fsync txnindex %s: %w", s.txnPath, err))
	}
	s.txnSynced = s.txnN
	return nil
}

// AppendAbortedTxn adds a to the .txnindex of the segment holding its ABORT marker
// (a.LastOffset), creating the file with its first entry. Markers must come in offset order
// (a.LastOffset above the segment's previous entry). A marker below the log start (deleted
// meanwhile) is ignored; one at or past the LEO is an error. A failed write poisons the Log
// (KAFKA_STORAGE_ERROR), as a failed segment write does: the index is then rebuilt by the
// next Open. Safe for concurrent use.
func (l *Log) AppendAbortedTxn(a AbortedTxn) error {
	if err := l.usable(); err != nil {
		return err
	}
	if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 {
		return fmt.Errorf("log: aborted transaction of producer id %d, first offset %d, last offset %d, last stable offset %d: want id >= 0, 0 <= first <= last, 0 <= lso <= last+1",
			a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
	}
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	l.mu.RLock()
	var seg *segment
	for i := len(l.mu.segs) - 1; i >= 0; i-- {
		if s := l.mu.segs[i]; s.base <= a.LastOffset {
			if a.LastOffset < s.next {
				seg = s
			}
			break
		}
	}
	leo := l.leo.Load()
	l.mu.RUnlock()
	if seg == nil || seg.txnGone {
		if a.LastOffset >= leo {
			return fmt.Errorf("log: aborted transaction marker offset %d is not below the LEO %d", a.LastOffset, leo)
		}
		return nil // below the log start: deleted meanwhile
	}
	if a.LastOffset <= seg.txnLast {
		return fmt.Errorf("log: aborted transaction marker offset %d is not above the last one %d of %s", a.LastOffset, seg.txnLast, filepath.Base(seg.txnPath))
	}
	flag := os.O_RDWR | os.O_CREATE
	if seg.txnN == 0 {
		flag |= os.O_TRUNC // a stale file of a crashed process goes
	}
	f, err := l.fs.OpenFile(seg.txnPath, flag, 0o644)
	if err != nil {
		return l.fail("append txnindex", fmt.Errorf("log: open txnindex %s: %w", seg.txnPath, err))
	}
	var buf [TxnIndexEntrySize]byte
	_, err = f.WriteAt(AppendTxnIndexEntry(buf[:0], a), int64(seg.txnN)*TxnIndexEntrySize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return l.poison("append txnindex", fmt.Errorf("log: write txnindex %s: %w", seg.txnPath, err))
	}
	seg.txnN++
	seg.txnLast = a.LastOffset
	return nil
}

// AppendAbortedTxns appends to dst the aborted transactions a read_committed fetch of
// [from, upTo) must know: those whose marker is at or past from and whose first offset is
// below upTo, read from the .txnindex files of the segments from the one holding from on,
// stopping at the first entry whose last stable offset reaches upTo (Kafka's
// collectAbortedTransactions). Segments without entries cost no I/O. Safe for concurrent use.
func (l *Log) AppendAbortedTxns(dst []AbortedTxn, from, upTo int64) ([]AbortedTxn, error) {
	if err := l.usable(); err != nil {
		return dst, err
	}
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	var segs []*segment
	l.mu.RLock()
	for _, s := range l.mu.segs {
		if s.next > from && s.txnN > 0 && s.txnLast >= from {
			segs = append(segs, s)
		}
	}
	l.mu.RUnlock()
	for _, s := range segs {
		ents, err := s.readTxnFile(l.fs)
		if err != nil {
			return dst, l.fail("read txnindex", err)
		}
		for _, a := range ents[:min(len(ents), s.txnN)] {
			if a.LastOffset >= from && a.FirstOffset < upTo {
				dst = append(dst, a)
			}
			if a.LastStableOffset >= upTo {
				return dst, nil
			}
		}
	}
	return dst, nil
}

// truncateTxns drops the segment's entries whose marker is at or past bound (txnMu held).
func (s *segment) truncateTxns(fs vfs.FS, bound int64) error {
	if s.txnN == 0 || s.txnLast < bound {
		return nil
	}
	ents, err := s.readTxnFile(fs)
	if err != nil {
		return err
	}
	ents = ents[:min(len(ents), s.txnN)]
	n := 0
	for n < len(ents) && ents[n].LastOffset < bound {
		n++
	}
	return s.writeTxnFile(fs, ents[:n])
}

// removeTxnIndex deletes the segment's .txnindex for good (its segment is deleted).
func (s *segment) removeTxnIndex(fs vfs.FS) error {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	s.txnGone = true
	s.txnN, s.txnSynced, s.txnLast = 0, 0, -1
	if err := fs.Remove(s.txnPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("log: delete txnindex %s: %w", s.txnPath, err)
	}
	return nil
}

// checkTxnIndexes runs at the end of Open's recovery: it recomputes the aborted transactions
// of every segment holding transactional batches from their headers and control batches
// (one header scan of those segments, one read per control batch) and rewrites a .txnindex
// that is missing, stale or corrupt; a .txnindex of a segment without transactional batches
// is deleted. An entry of the file is kept when its transaction started before the first
// segment (the scan cannot see its first record). Returns why each file was rewritten.
func (l *Log) checkTxnIndexes(files map[int64]bool) (rebuilt int, reasons []string, err error) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	ongoing := map[int64]int64{} // producer id -> first offset of its open transaction
	for _, s := range l.mu.segs {
		if !s.txnSeen {
			if _, serr := l.fs.Stat(s.txnPath); files[s.base] && serr == nil {
				if err := s.writeTxnFile(l.fs, nil); err != nil {
					return rebuilt, reasons, err
				}
				rebuilt++
				reasons = append(reasons, fmt.Sprintf("txnindex %s of a segment without transactional batches: deleted", filepath.Base(s.txnPath)))
			}
			continue
		}
		var have []AbortedTxn
		why := ""
		if files[s.base] {
			if have, err = s.readTxnFile(l.fs); err != nil {
				if IsResourceError(err) || errors.Is(err, ErrClosed) {
					return rebuilt, reasons, err
				}
				why = err.Error()
				have = nil
			}
		}
		var want []AbortedTxn
		err := l.ForEachBatchHeader(s.base, func(h records.Header) error {
			if h.BaseOffset >= s.next {
				return ErrStopScan
			}
			if h.ProducerID < 0 {
				return nil
			}
			if !h.IsControl() {
				if _, ok := ongoing[h.ProducerID]; !ok && h.IsTransactional() && h.ProducerEpoch >= 0 {
					ongoing[h.ProducerID] = h.BaseOffset
				}
				return nil
			}
			m, err := l.readControl(h)
			if err != nil {
				return fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
			}
			first, open := ongoing[h.ProducerID]
			delete(ongoing, h.ProducerID)
			if m.Commit() {
				return nil
			}
			if i := slices.IndexFunc(have, func(a AbortedTxn) bool { return a.LastOffset == h.BaseOffset }); i >= 0 &&
				have[i].ProducerID == h.ProducerID && (!open || have[i].FirstOffset == first) {
				want = append(want, have[i]) // as written (its first record may be below the log)
				return nil
			}
			if !open {
				return nil // a marker for a transaction with no data here
			}
			lso := h.BaseOffset + 1
			for _, f := range ongoing {
				lso = min(lso, f)
			}
			want = append(want, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso})
			return nil
		})
		if err != nil {
			return rebuilt, reasons, err
		}
		if why == "" && !slices.Equal(have, want) {
			why = fmt.Sprintf("txnindex %s holds %d entries, its segment's ABORT markers give %d", filepath.Base(s.txnPath), len(have), len(want))
			if !files[s.base] {
				why = fmt.Sprintf("txnindex %s missing for %d ABORT markers", filepath.Base(s.txnPath), len(want))
			}
		}
		if why == "" {
			s.txnN, s.txnSynced, s.txnLast = len(have), len(have), -1
			if len(have) > 0 {
				s.txnLast = have[len(have)-1].LastOffset
			}
			continue
		}
		if err := s.writeTxnFile(l.fs, want); err != nil {
			return rebuilt, reasons, err
		}
		rebuilt++
		reasons = append(reasons, why+": rebuilt")
	}
	return rebuilt, reasons, nil
}

// readControl reads the control batch with header h back and parses its marker.
func (l *Log) readControl(h records.Header) (records.Marker, error) {
	sl, err := l.Read(h.BaseOffset, h.NextOffset(), h.Size(), true)
	if err != nil {
		return records.Marker{}, err
	}
	buf, err := sl.ReadAll(nil)
	sl.Release()
	if err != nil {
		return records.Marker{}, err
	}
	return records.ParseMarker(buf)
}
