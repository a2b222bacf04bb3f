package partition

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// Producer-state snapshots (Kafka's <offset>.snapshot files of ProducerStateManager): Close
// writes the producer and transaction state at the LEO to <replica dir>/<LEO, 20
// digits>.snapshot; the next open loads it when its offset is within [log start, LEO] and
// replays only the batches after it, then removes it (a truncation can then never meet a
// stale snapshot). Without a usable snapshot (a crash, a damaged file) the state is rebuilt
// from the log, on top of the log-start snapshot (logstartsnap.go, the same layout): this
// one only saves time, that one holds what the log no longer does.
//
// Layout (big endian), CRC-32C over everything after the crc field:
//
//	version int16 = 3 | crc uint32 | offset int64 |
//	producers int32 × { id int64 | epoch int16 | coordinator_epoch int32 | txn_first int64 (-1) |
//	                    last int64 (version >= 2: the entry's last batch or marker, -1) |
//	                    last_timestamp int64 (version 3: that batch's max timestamp or the
//	                                          marker's timestamp, ms; -1 unknown) |
//	                    batches int32 × { first_seq int32 | last_seq int32 | first_offset int64 |
//	                                      last_offset int64 | max_timestamp int64 } } |
//	unreplicated int32 × { first int64 | marker int64 } |
//	aborted int32 × { producer_id int64 | first int64 | last int64 }   (written as 0 entries and
//	                  ignored when read: the aborted transactions live in the log's .txnindex files)

const snapshotSuffix = ".snapshot"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// producerSnapshot is a decoded snapshot file.
type producerSnapshot struct {
	offset       int64
	entries      map[int64]*producerEntry
	ongoing      map[int64]int64
	unreplicated []txnSpan
}

// snapshotVersion is the version encodeSnapshotLocked writes; decodeSnapshot reads 1 and 2
// too (an older build's files).
const snapshotVersion = 3

// encodeSnapshotLocked encodes the state at offset (ps.mu held): of every producer, or of
// those keep returns true for (nil: every one); the unreplicated transactions only with
// every producer.
func (ps *producerState) encodeSnapshotLocked(offset int64, keep func(*producerEntry) bool) []byte {
	be := binary.BigEndian
	b := be.AppendUint16(nil, snapshotVersion)
	b = be.AppendUint32(b, 0) // crc, below
	b = be.AppendUint64(b, uint64(offset))
	ids := slices.Sorted(func(yield func(int64) bool) {
		for id, e := range ps.producers {
			if (keep == nil || keep(e)) && !yield(id) {
				return
			}
		}
	})
	b = be.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := ps.producers[id]
		first, ok := ps.txn.ongoing[id]
		if !ok {
			first = -1
		}
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint32(b, uint32(e.coordEpoch))
		b = be.AppendUint64(b, uint64(first))
		b = be.AppendUint64(b, uint64(e.lastAt))
		b = be.AppendUint64(b, uint64(e.lastTs))
		b = be.AppendUint32(b, uint32(e.n))
		for i := 0; i < e.n; i++ {
			m := e.batches[(e.head+i)%NumBatchesToRetain]
			b = be.AppendUint32(b, uint32(m.firstSeq))
			b = be.AppendUint32(b, uint32(m.lastSeq))
			b = be.AppendUint64(b, uint64(m.firstOffset))
			b = be.AppendUint64(b, uint64(m.lastOffset))
			b = be.AppendUint64(b, uint64(m.maxTimestamp))
		}
	}
	var unreplicated []txnSpan
	if keep == nil {
		unreplicated = ps.txn.unreplicated
	}
	b = be.AppendUint32(b, uint32(len(unreplicated)))
	for _, s := range unreplicated {
		b = be.AppendUint64(b, uint64(s.first))
		b = be.AppendUint64(b, uint64(s.marker))
	}
	b = be.AppendUint32(b, 0) // aborted transactions: in the log's .txnindex files now
	be.PutUint32(b[2:], crc32.Checksum(b[6:], crcTable))
	return b
}

// snapReader reads big-endian fields, remembering the first short read.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("producer snapshot: %s: need %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *snapReader) i16(what string) int16 {
	if v := r.take(2, what); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *snapReader) i32(what string) int32 {
	if v := r.take(4, what); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *snapReader) i64(what string) int64 {
	if v := r.take(8, what); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// count reads an element count and checks that count elements of size bytes can fit.
func (r *snapReader) count(size int, what string) int {
	n := r.i32(what)
	if r.err == nil && (n < 0 || int64(n)*int64(size) > int64(len(r.b))) {
		r.err = fmt.Errorf("producer snapshot: %s %d does not fit the %d bytes left", what, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

// decodeSnapshot decodes a snapshot file. Errors name what is wrong (version, CRC, a count
// or field that does not fit).
func decodeSnapshot(b []byte) (*producerSnapshot, error) {
	r := &snapReader{b: b}
	version := r.i16("version")
	if r.err == nil && (version < 1 || version > snapshotVersion) {
		return nil, fmt.Errorf("producer snapshot: version %d unknown (want 1 to %d)", version, snapshotVersion)
	}
	crc := uint32(r.i32("crc"))
	if r.err != nil {
		return nil, r.err
	}
	if sum := crc32.Checksum(r.b, crcTable); sum != crc {
		return nil, fmt.Errorf("producer snapshot: crc mismatch: stored %#08x, computed %#08x", crc, sum)
	}
	s := &producerSnapshot{offset: r.i64("offset"), entries: map[int64]*producerEntry{}, ongoing: map[int64]int64{}}
	size := 26
	if version >= 2 {
		size += 8
	}
	if version >= 3 {
		size += 8
	}
	n := r.count(size, "producers")
	for i := 0; i < n && r.err == nil; i++ {
		id := r.i64("producer id")
		e := newProducerEntry(r.i16("epoch"))
		e.coordEpoch = r.i32("coordinator epoch")
		if first := r.i64("transaction start"); first >= 0 {
			s.ongoing[id] = first
		}
		if version >= 2 {
			e.lastAt = r.i64("last offset")
		}
		lastTs := int64(-1) // older versions: the last batch's, or unknown (a marker only)
		if version >= 3 {
			lastTs = r.i64("last timestamp")
		}
		nb := r.count(32, "batches")
		if nb > NumBatchesToRetain {
			return nil, fmt.Errorf("producer snapshot: producer %d has %d batches, at most %d", id, nb, NumBatchesToRetain)
		}
		for j := 0; j < nb; j++ {
			e.push(batchMeta{firstSeq: r.i32("first sequence"), lastSeq: r.i32("last sequence"),
				firstOffset: r.i64("first offset"), lastOffset: r.i64("last offset"), maxTimestamp: r.i64("max timestamp")})
		}
		if version >= 3 || e.n == 0 {
			e.lastTs = lastTs
		}
		if version == 1 {
			// No last offset recorded: the entry's last batch, else (a marker only) just below
			// the snapshot's offset, the latest it can be.
			e.lastAt = s.offset - 1
			if e.n > 0 {
				e.lastAt = e.last().lastOffset
			}
		}
		s.entries[id] = e
	}
	n = r.count(16, "unreplicated transactions")
	for i := 0; i < n; i++ {
		s.unreplicated = append(s.unreplicated, txnSpan{first: r.i64("first"), marker: r.i64("marker")})
	}
	n = r.count(24, "aborted transactions")
	for i := 0; i < n; i++ {
		r.i64("producer id") // older snapshots' aborted list: the .txnindex files have it
		r.i64("first")
		r.i64("last")
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("producer snapshot: %d bytes after the aborted transactions", len(r.b))
	}
	return s, nil
}

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, snapshotSuffix))
}

// snapshotFiles lists the snapshot files of dir by offset.
func snapshotFiles(fs vfs.FS, dir string) map[int64]string {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[int64]string{}
	for _, e := range ents {
		name := e.Name()
		if len(name) != 20+len(snapshotSuffix) || !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		if off, err := strconv.ParseInt(name[:20], 10, 64); err == nil {
			out[off] = filepath.Join(dir, name)
		}
	}
	return out
}

// writeSnapshot writes the state at the LEO (Close, roleMu held). A failure leaves no
// snapshot: the next open replays the whole log.
func (r *Replica) writeSnapshot() {
	if r.dir == "" {
		return
	}
	fs := vfs.Or(r.cfg.FS)
	ps := &r.producers
	ps.mu.Lock()
	leo := r.log.LEO()
	data := ps.encodeSnapshotLocked(leo, nil)
	ps.mu.Unlock()
	for off, p := range snapshotFiles(fs, r.dir) {
		if off != leo {
			_ = fs.Remove(p)
		}
	}
	if err := vfs.WriteFileAtomic(fs, snapshotPath(r.dir, leo), data); err != nil {
		_ = fs.Remove(snapshotPath(r.dir, leo))
	}
}

// loadProducers is the open's rebuild: from the snapshot file at an offset in [log start,
// LEO] plus the batches after it, else from the whole log. Every snapshot file is removed.
func (r *Replica) loadProducers() error {
	if r.dir == "" {
		return r.rebuildProducers()
	}
	fs := vfs.Or(r.cfg.FS)
	r.loadLogStartSnapshot(fs)
	files := snapshotFiles(fs, r.dir)
	var snap *producerSnapshot
	best := int64(-1)
	for off := range files {
		if off >= r.log.LogStart() && off <= r.log.LEO() && off > best {
			best = off
		}
	}
	if best >= 0 {
		if b, err := vfs.ReadFile(fs, files[best]); err == nil {
			if snap, err = decodeSnapshot(b); err == nil && snap.offset != best {
				snap = nil // a file renamed by hand: not trusted
			}
		}
	}
	for _, p := range files {
		_ = fs.Remove(p)
	}
	if snap == nil {
		return r.rebuildProducers()
	}
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.producers = snap.entries
	ps.txn.ongoing, ps.txn.unreplicated = snap.ongoing, snap.unreplicated
	ps.txn.count()
	return r.replayLocked(snap.offset)
}
