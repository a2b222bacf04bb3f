package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Control records (Kafka's ControlRecordType and EndTransactionMarker): a control batch has
// the control and transactional attribute bits, the producer id and epoch of the transaction
// it ends, base sequence -1 and one record:
//
//	key   version int16 = 0 | type int16 (0 ABORT, 1 COMMIT)
//	value version int16 = 0 | coordinator_epoch int32
//
// Kafka readers accept any key version >= 0 (only the first 4 bytes are read) and any value
// version >= 0; so do these decoders.

// Control record types (Kafka's ControlRecordType).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Marker is a decoded transaction marker: what a control batch says.
type Marker struct {
	Type             int16 // ControlAbort or ControlCommit
	CoordinatorEpoch int32
}

// Commit reports whether the marker commits its transaction.
func (m Marker) Commit() bool { return m.Type == ControlCommit }

// String names the marker as kafka-dump-log.sh does ("COMMIT" / "ABORT").
func (m Marker) String() string {
	switch m.Type {
	case ControlCommit:
		return "COMMIT"
	case ControlAbort:
		return "ABORT"
	}
	return fmt.Sprintf("UNKNOWN(%d)", m.Type)
}

// AppendControlBatch appends one uncompressed control batch (one marker record) of producer
// id / epoch to dst: commit or abort, with the transaction coordinator's epoch. baseOffset
// and the leader epoch are patched by the leader's append as for any batch.
func AppendControlBatch(dst []byte, producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, timestamp int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 2, 4), uint16(typ))
	value := binary.BigEndian.AppendUint32(make([]byte, 2, 6), uint32(coordinatorEpoch))
	start := len(dst)
	dst = AppendBatch(dst, 0, 0, timestamp, []Record{{Key: key, Value: value}})
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], uint16(TransactionalBit|ControlBit))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[crcStart:], castagnoli))
	return dst
}

// ParseControlRecord decodes a control record's key and value (EndTransactionMarker). Errors
// (wrapping kerr.CorruptMessage) name what is wrong: a null or short key, a negative
// version, an unknown type, a short value.
func ParseControlRecord(key, value []byte) (Marker, error) {
	if len(key) < 4 {
		return Marker{}, corruptf("control record key has %d bytes, need 4 (version int16, type int16)", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return Marker{}, corruptf("control record key version %d is negative", v)
	}
	m := Marker{Type: int16(binary.BigEndian.Uint16(key[2:]))}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return Marker{}, corruptf("control record type %d unknown (0 ABORT, 1 COMMIT)", m.Type)
	}
	if len(value) < 6 {
		return Marker{}, corruptf("%s marker value has %d bytes, need 6 (version int16, coordinator_epoch int32)", m, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return Marker{}, corruptf("%s marker value version %d is negative", m, v)
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	return m, nil
}

// ParseMarker decodes the marker of a whole control batch (header and records, uncompressed,
// as Validate accepts it): its first record. A batch without the control bit, compressed or
// without a record is an error.
func ParseMarker(batch []byte) (Marker, error) {
	h, err := Validate(batch)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() {
		return Marker{}, invalidf("batch at offset %d is not a control batch", h.BaseOffset)
	}
	var m Marker
	found := false
	errStop := fmt.Errorf("stop")
	err = ForEachRecord(batch[:h.Size()], func(_, _ int64, key, value []byte) error {
		m, err = ParseControlRecord(key, value)
		found = true
		if err != nil {
			return err
		}
		return errStop
	})
	if err != nil && err != errStop {
		return Marker{}, fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
	}
	if !found {
		return Marker{}, corruptf("control batch at offset %d has no record", h.BaseOffset)
	}
	return m, nil
}

// AppendTxnBatch appends one uncompressed transactional data batch of producer id / epoch
// with base sequence -1 (a coordinator's write for a producer: the group coordinator's
// TxnOffsetCommit records).
func AppendTxnBatch(dst []byte, producerID int64, producerEpoch int16, timestamp int64, recs []Record) []byte {
	start := len(dst)
	dst = AppendBatch(dst, 0, 0, timestamp, recs)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], uint16(TransactionalBit))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[crcStart:], castagnoli))
	return dst
}
