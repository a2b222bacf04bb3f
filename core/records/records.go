package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// HeaderSize is the size of a RecordBatch v2 header: the bytes before the first record.
const HeaderSize = 61

// Field positions inside a RecordBatch v2 header.
const (
	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offBaseTimestamp        = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordsCount         = 57

	// crcStart is the first byte covered by the CRC.
	crcStart = offAttributes
	// minBatchLength is the batchLength of a batch with no records.
	minBatchLength = HeaderSize - offPartitionLeaderEpoch
	// MaxBatchLength bounds batchLength so that 12+batchLength fits an int32 (Kafka's limit).
	MaxBatchLength = math.MaxInt32 - offPartitionLeaderEpoch
)

// Attribute bits (Kafka's DefaultRecordBatch).
const (
	CompressionMask    = 0x07
	TimestampTypeBit   = 0x08
	TransactionalBit   = 0x10
	ControlBit         = 0x20
	CompressionNone    = 0
	CompressionGzip    = 1
	CompressionSnappy  = 2
	CompressionLZ4     = 3
	CompressionZstd    = 4
	maxCompressionCode = CompressionZstd
)

// ErrCompressed is returned (wrapped) by ForEachRecord for a compressed batch: this package
// reads uncompressed records only.
var ErrCompressed = errors.New("records: compressed batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded RecordBatch v2 header. It is a plain value; copy it freely.
type Header struct {
	BaseOffset           int64 // first offset of the batch, inclusive
	BatchLength          int32 // bytes after the batchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordsCount         int32
}

// Size is the number of bytes the batch occupies on disk and on the wire: 12 + BatchLength.
func (h Header) Size() int { return offPartitionLeaderEpoch + int(h.BatchLength) }

// LastOffset is the offset of the last record of the batch (inclusive).
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is LastOffset+1: the first offset after the batch (exclusive end).
func (h Header) NextOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) + 1 }

// Compression is the compression codec from the attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h Header) Compression() int8 { return int8(h.Attributes & CompressionMask) }

// IsTransactional reports the transactional attribute bit.
func (h Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }

// IsControl reports the control-batch attribute bit.
func (h Header) IsControl() bool { return h.Attributes&ControlBit != 0 }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("records: "+format+": %w", append(args, kerr.CorruptMessage)...)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("records: "+format+": %w", append(args, kerr.InvalidRecord)...)
}

// ParseHeader decodes and sanity-checks the header at the start of b. b needs at least
// HeaderSize bytes, not the whole batch; the CRC is not checked (see Validate). Checks: magic
// is 2; batchLength in [49, MaxBatchLength]; baseOffset >= 0 and LastOffset does not overflow;
// lastOffsetDelta >= 0; 0 <= recordsCount <= lastOffsetDelta+1; compression codec known.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corruptf("batch header truncated: have %d bytes, need %d", len(b), HeaderSize)
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordsCount:         int32(binary.BigEndian.Uint32(b[offRecordsCount:])),
	}
	if h.Magic != 2 {
		return h, invalidf("magic is %d, want 2 (RecordBatch v2)", h.Magic)
	}
	if h.BatchLength < minBatchLength || h.BatchLength > MaxBatchLength {
		return h, corruptf("batchLength %d out of range [%d, %d]", h.BatchLength, minBatchLength, MaxBatchLength)
	}
	if h.BaseOffset < 0 {
		return h, invalidf("baseOffset %d is negative", h.BaseOffset)
	}
	if h.LastOffsetDelta < 0 {
		return h, invalidf("lastOffsetDelta %d is negative", h.LastOffsetDelta)
	}
	if h.BaseOffset > math.MaxInt64-1-int64(h.LastOffsetDelta) {
		return h, invalidf("baseOffset %d + lastOffsetDelta %d overflows", h.BaseOffset, h.LastOffsetDelta)
	}
	if h.RecordsCount < 0 || int64(h.RecordsCount) > int64(h.LastOffsetDelta)+1 {
		return h, invalidf("recordsCount %d inconsistent with lastOffsetDelta %d (want 0..lastOffsetDelta+1)", h.RecordsCount, h.LastOffsetDelta)
	}
	if c := h.Attributes & CompressionMask; c > maxCompressionCode {
		return h, invalidf("attributes compression codec %d unknown", c)
	}
	return h, nil
}

// Validate is ParseHeader plus the length and CRC check of the whole batch at the start of b:
// b must hold Size() bytes (more is fine, the rest is ignored) and the CRC-32C over
// b[21:Size()] must match the crc field.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if size > len(b) {
		return h, corruptf("batch at baseOffset %d truncated: batchLength %d needs %d bytes, have %d", h.BaseOffset, h.BatchLength, size, len(b))
	}
	if sum := crc32.Checksum(b[crcStart:size], castagnoli); sum != h.CRC {
		return h, corruptf("crc mismatch in batch at baseOffset %d: stored %#08x, computed %#08x", h.BaseOffset, h.CRC, sum)
	}
	return h, nil
}

// Split walks the consecutive batches in b, validating each one (header and CRC), and calls fn
// with each batch's bytes (a sub-slice of b, capacity clipped) and header. It stops at the
// first error from validation or fn. Trailing bytes that are not a whole batch are an error
// wrapping kerr.CorruptMessage. An empty b calls fn zero times and returns nil.
func Split(b []byte, fn func(batch []byte, h Header) error) error {
	for pos := 0; pos < len(b); {
		h, err := Validate(b[pos:])
		if err != nil {
			return fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		end := pos + h.Size()
		if err := fn(b[pos:end:end], h); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// SetBaseOffset overwrites the baseOffset field in place (outside the CRC). b must hold at
// least a header; shorter b is a programmer error and panics.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:offBaseOffset+8], uint64(off))
}

// SetPartitionLeaderEpoch overwrites the partitionLeaderEpoch field in place (outside the CRC).
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:offPartitionLeaderEpoch+4], uint32(epoch))
}
