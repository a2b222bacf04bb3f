package log

import (
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// headerScanChunk is how many bytes ForEachBatchHeader reads at once: small batches share one
// pread, a batch larger than this costs one pread of its header.
const headerScanChunk = 64 << 10

// scanAhead: a chunk is read only when it holds this many more headers.
const scanAhead = 8

// ErrStopScan may be returned by a ForEachBatchHeader callback to end the scan early; the
// scan then returns nil.
var ErrStopScan = errors.New("log: stop scan")

// ForEachBatchHeader calls fn with the header of every batch whose base offset is >= from
// (inclusive; a from inside a batch starts at the next batch), in offset order up to the LEO
// as it was when the call began (exclusive). Only headers are read (pread, headerScanChunk bytes at
// a time), never whole batches, and the CRC is not checked (Open checked it). Used to rebuild
// state derived from batch headers (the idempotent producers' state) after Open and after
// TruncateTo. fn returning ErrStopScan ends the scan with nil; another error ends it with
// that error.
//
// Concurrency: safe with concurrent appends (batches published after the call began are not
// visited) and reads. A truncation or retention running at the same time may make the scan
// see rewritten bytes: the header is then rejected with an error wrapping
// kerr.CorruptMessage, or the scan ends early, or skips a segment deleted meanwhile; callers
// that need an exact view serialise truncation against the scan themselves. One segment
// file is open at a time; failing to open one for want of a descriptor is a resource error
// (IsResourceError).
func (l *Log) ForEachBatchHeader(from int64, fn func(h records.Header) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	type segView struct {
		seg     *segment
		entries []entry // private copy: the table's backing array is rewritten after a truncation
		size    int64
	}
	var views []segView
	l.mu.RLock()
	if len(l.mu.segs) == 0 {
		l.mu.RUnlock()
		return ErrClosed
	}
	for _, s := range l.mu.segs {
		if len(s.entries) == 0 || s.next <= from {
			continue
		}
		i := 0
		if from > s.base {
			// first batch with base offset >= from
			i = s.find(from)
			if s.baseAt(i) < from {
				i++
			}
		}
		if i >= len(s.entries) {
			continue
		}
		views = append(views, segView{seg: s, entries: append([]entry(nil), s.entries[i:]...), size: s.size})
	}
	l.mu.RUnlock()
	if len(views) == 0 {
		return nil // an empty log (every new replica's): no scan buffer to allocate
	}
	buf := make([]byte, headerScanChunk)
	for _, v := range views {
		// One segment file open at a time, not all of them.
		h, err := v.seg.acquire()
		if errors.Is(err, errSegmentGone) {
			continue // deleted by retention or truncation meanwhile
		}
		if err != nil {
			return l.ioError("scan", err)
		}
		err = l.scanView(h.f, v.seg, v.entries, v.size, buf, fn)
		h.unref()
		if errors.Is(err, ErrStopScan) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// scanView calls fn with the header of each batch of entries, read from f, the file of seg,
// whose size was size when the scan began.
func (l *Log) scanView(f vfs.File, seg *segment, entries []entry, size int64, buf []byte, fn func(h records.Header) error) error {
	var bufPos int64 = -1 // file position of buf[0]; -1 = nothing buffered
	bufLen := 0
	for i, e := range entries {
		pos := int64(e.pos)
		if bufPos < 0 || pos < bufPos || pos+records.HeaderSize > bufPos+int64(bufLen) {
			// Read a whole chunk when it holds the next scanAhead headers
			// (small batches), else just this header (one pread per batch
			// beats copying the records in between).
			want := min(int64(len(buf)), size-pos)
			if j := i + scanAhead; j < len(entries) && int64(entries[j].pos)+records.HeaderSize > pos+want {
				want = min(want, records.HeaderSize)
			}
			n, err := f.ReadAt(buf[:want], pos)
			if n < records.HeaderSize {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("log %s: scan: read batch header at position %d of %s: %w: %w", l.dir, pos, seg.logPath, err, kerr.CorruptMessage)
			}
			bufPos, bufLen = pos, n
		}
		off := int(pos - bufPos)
		h, err := records.ParseHeader(buf[off:bufLen])
		if err != nil {
			return fmt.Errorf("log %s: scan: batch at position %d of %s: %w", l.dir, pos, seg.logPath, err)
		}
		if want := seg.base + int64(e.rel); h.BaseOffset != want {
			return fmt.Errorf("log %s: scan: batch at position %d of %s has baseOffset %d, the table says %d (concurrent truncation?): %w",
				l.dir, pos, seg.logPath, h.BaseOffset, want, kerr.CorruptMessage)
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}
