package group

import (
	"errors"
	"fmt"

	"github.com/isrbench/isrbench/core/records"
)

// Loaded is what a replay of one __consumer_offsets partition found: the last group metadata
// of every group and its committed offsets, later records replacing earlier ones and
// tombstones deleting. A plain value owned by its builder.
type Loaded struct {
	Groups  map[string]StoredGroup
	Offsets map[string]map[TP]Committed
	// Records counts the records replayed; Skipped the records that could not be decoded
	// (reported, not fatal: a coordinator must come up even if one record is bad).
	Records, Skipped int
	// TxnOffsets are the offsets of transactions still open at the end of the replay:
	// group -> producer id -> offsets (TxnOffsetCommit records without their marker yet).
	TxnOffsets map[string]map[int64]map[TP]Committed
}

// NewLoaded returns an empty Loaded.
func NewLoaded() *Loaded {
	return &Loaded{Groups: map[string]StoredGroup{}, Offsets: map[string]map[TP]Committed{}, TxnOffsets: map[string]map[int64]map[TP]Committed{}}
}

// ApplyBatches replays the RecordBatch v2 bytes in b (whole batches, as read from the log) in
// offset order. A batch that fails its CRC, or is compressed (the coordinator writes
// uncompressed batches only), is an error: the log is not what the coordinator wrote.
func (l *Loaded) ApplyBatches(b []byte) error {
	return records.Split(b, func(batch []byte, h records.Header) error {
		if h.IsControl() {
			m, err := records.ParseMarker(batch)
			if err != nil {
				return fmt.Errorf("group: __consumer_offsets control batch at offset %d: %w", h.BaseOffset, err)
			}
			l.applyMarker(h.ProducerID, m.Commit())
			return nil
		}
		err := records.ForEachRecord(batch, func(off, _ int64, key, value []byte) error {
			if h.IsTransactional() {
				l.applyTxn(h.ProducerID, off, key, value)
				return nil
			}
			l.apply(off, key, value)
			return nil
		})
		if errors.Is(err, records.ErrCompressed) {
			return fmt.Errorf("group: __consumer_offsets batch at offset %d is compressed (codec %d): %w", h.BaseOffset, h.Compression(), err)
		}
		return err
	})
}

func (l *Loaded) apply(off int64, key, value []byte) {
	l.Records++
	if key == nil {
		l.Skipped++
		return
	}
	d, err := DecodeRecord(key, value)
	if err != nil {
		l.Skipped++
		return
	}
	if !d.IsOffset {
		if d.Tombstone {
			delete(l.Groups, d.Group) // offsets have their own tombstones, as in Kafka
			return
		}
		l.Groups[d.Group] = d.Stored
		return
	}
	offs := l.Offsets[d.Group]
	if d.Tombstone {
		delete(offs, d.TP)
		return
	}
	if offs == nil {
		offs = map[TP]Committed{}
		l.Offsets[d.Group] = offs
	}
	c := d.Offset
	c.logOffset = off
	offs[d.TP] = c
}
