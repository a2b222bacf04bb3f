package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Record is one record for AppendBatch. Key or Value nil encodes as null (length -1).
// OffsetDelta is ignored by AppendBatch, which numbers records 0..n-1. A plain value: share it
// read-only between goroutines.
type Record struct {
	Key, Value     []byte
	Headers        []RecordHeader
	TimestampDelta int64 // ms relative to the batch's baseTimestamp
	OffsetDelta    int32
}

// RecordHeader is one record header (key is never null on the wire; value may be). A plain value.
type RecordHeader struct {
	Key   string
	Value []byte
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63) // zig-zag
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// AppendBatch appends one uncompressed RecordBatch v2 holding recs to dst and returns the
// extended slice. Records get offsetDelta 0..n-1; lastOffsetDelta is n-1 (0 for an empty
// batch); maxTimestamp is baseTimestamp plus the largest TimestampDelta; producer id, epoch
// and base sequence are -1 (not idempotent); the CRC is computed. It allocates only when dst
// lacks capacity.
func AppendBatch(dst []byte, baseOffset int64, leaderEpoch int32, baseTimestamp int64, recs []Record) []byte {
	start := len(dst)
	var hdr [HeaderSize]byte
	dst = append(dst, hdr[:]...)
	maxDelta := int64(0)
	for i := range recs {
		r := &recs[i]
		if i == 0 || r.TimestampDelta > maxDelta {
			maxDelta = r.TimestampDelta
		}
		body := 1 + varintLen(r.TimestampDelta) + varintLen(int64(i)) + bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
		for j := range r.Headers {
			h := &r.Headers[j]
			body += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
		}
		dst = binary.AppendVarint(dst, int64(body))
		dst = append(dst, 0) // record attributes
		dst = binary.AppendVarint(dst, r.TimestampDelta)
		dst = binary.AppendVarint(dst, int64(i))
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for j := range r.Headers {
			h := &r.Headers[j]
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendBytes(dst, h.Value)
		}
	}
	b := dst[start:]
	lastDelta := int32(0)
	if len(recs) > 0 {
		lastDelta = int32(len(recs) - 1)
	}
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-offPartitionLeaderEpoch))
	be.PutUint32(b[offPartitionLeaderEpoch:], uint32(leaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], 0)
	be.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(baseTimestamp))
	be.PutUint64(b[offMaxTimestamp:], uint64(baseTimestamp+maxDelta))
	be.PutUint64(b[offProducerID:], math.MaxUint64) // -1
	be.PutUint16(b[offProducerEpoch:], math.MaxUint16)
	be.PutUint32(b[offBaseSequence:], math.MaxUint32)
	be.PutUint32(b[offRecordsCount:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[crcStart:], castagnoli))
	return dst
}

// recordReader decodes zig-zag varints from a byte slice, remembering the first error.
type recordReader struct {
	b   []byte
	err error
}

// field names are passed as two parts (joined only for an error message), so decoding
// allocates nothing.
func (r *recordReader) varint(field, suffix string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = corruptf("record %s%s: bad varint", field, suffix)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) int32Varint(field, suffix string) int32 {
	v := r.varint(field, suffix)
	if r.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.err = corruptf("record %s%s %d overflows int32", field, suffix, v)
		return 0
	}
	return int32(v)
}

// bytes reads a length-prefixed byte string; null (length -1) returns nil and null=true.
func (r *recordReader) bytes(field string) (v []byte, null bool) {
	n := r.int32Varint(field, " length")
	if r.err != nil {
		return nil, false
	}
	if n < 0 {
		if n != -1 {
			r.err = corruptf("record %s length %d is negative", field, n)
		}
		return nil, true
	}
	if int(n) > len(r.b) {
		r.err = corruptf("record %s length %d exceeds the %d bytes left", field, n, len(r.b))
		return nil, false
	}
	v = r.b[:n:n]
	r.b = r.b[n:]
	return v, false
}

// ForEachRecord validates batch (header and CRC) and calls fn for each record with its
// absolute offset (baseOffset + offsetDelta), timestamp (baseTimestamp + timestampDelta, or
// maxTimestamp for LogAppendTime batches), key and value (nil when null). key and value alias
// batch: valid while batch is. Compressed batches return an error wrapping ErrCompressed.
// A record that overruns its length, the batch, or a count that disagrees with recordsCount is
// an error wrapping kerr.CorruptMessage. fn's error stops the walk and is returned as is.
func ForEachRecord(batch []byte, fn func(offset int64, timestamp int64, key, value []byte) error) error {
	h, err := Validate(batch)
	if err != nil {
		return err
	}
	if c := h.Compression(); c != CompressionNone {
		return fmt.Errorf("records: batch at baseOffset %d uses compression codec %d: %w", h.BaseOffset, c, ErrCompressed)
	}
	rest := batch[HeaderSize:h.Size()]
	for i := int32(0); i < h.RecordsCount; i++ {
		r := recordReader{b: rest}
		length := r.int32Varint("length", "")
		if r.err != nil {
			return fmt.Errorf("record %d of batch at baseOffset %d: %w", i, h.BaseOffset, r.err)
		}
		if length < 0 || int(length) > len(r.b) {
			return corruptf("record %d of batch at baseOffset %d: length %d exceeds the %d bytes left", i, h.BaseOffset, length, len(r.b))
		}
		rest = r.b[length:]
		r.b = r.b[:length]
		if len(r.b) < 1 {
			return corruptf("record %d of batch at baseOffset %d: attributes missing", i, h.BaseOffset)
		}
		r.b = r.b[1:] // record attributes (unused)
		tsDelta := r.varint("timestampDelta", "")
		offDelta := r.int32Varint("offsetDelta", "")
		key, _ := r.bytes("key")
		value, _ := r.bytes("value")
		nh := r.int32Varint("headers count", "")
		for j := int32(0); j < nh && r.err == nil; j++ {
			if _, null := r.bytes("header key"); null && r.err == nil {
				r.err = corruptf("record header %d key is null", j)
			}
			r.bytes("header value")
		}
		if r.err == nil && nh < 0 {
			r.err = corruptf("record headers count %d is negative", nh)
		}
		if r.err == nil && len(r.b) != 0 {
			r.err = corruptf("record has %d bytes after its headers", len(r.b))
		}
		if r.err == nil && (offDelta < 0 || offDelta > h.LastOffsetDelta) {
			r.err = corruptf("record offsetDelta %d outside [0, lastOffsetDelta %d]", offDelta, h.LastOffsetDelta)
		}
		if r.err != nil {
			return fmt.Errorf("record %d of batch at baseOffset %d: %w", i, h.BaseOffset, r.err)
		}
		ts := h.BaseTimestamp + tsDelta
		if h.Attributes&TimestampTypeBit != 0 {
			ts = h.MaxTimestamp
		}
		if err := fn(h.BaseOffset+int64(offDelta), ts, key, value); err != nil {
			return err
		}
	}
	if len(rest) != 0 {
		return corruptf("batch at baseOffset %d has %d bytes after its %d records (recordsCount)", h.BaseOffset, len(rest), h.RecordsCount)
	}
	return nil
}
