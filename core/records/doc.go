// Package records parses, validates and patches Kafka RecordBatch v2 bytes (magic 2), the unit
// isrbench stores in segment files and sends on the wire unchanged.
//
// It owns nothing but functions over byte slices: no goroutines, no state, no I/O. Every
// function may be called concurrently on different slices; functions that patch a batch
// (SetBaseOffset, SetPartitionLeaderEpoch) must not race with readers of the same slice.
//
// # Byte layout of a RecordBatch v2 (big endian)
//
//	offset  size  field                 notes
//	     0     8  baseOffset            first offset of the batch (inclusive); patched by the leader
//	     8     4  batchLength           bytes after this field: batch size = 12 + batchLength
//	    12     4  partitionLeaderEpoch  patched by the leader; outside the CRC
//	    16     1  magic                 must be 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes [21, 12+batchLength)
//	    21     2  attributes            bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
//	    23     4  lastOffsetDelta       last offset (inclusive) = baseOffset + lastOffsetDelta
//	    27     8  baseTimestamp         ms
//	    35     8  maxTimestamp          ms
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordsCount
//	    61     …  records               uncompressed: recordsCount records, below; else compressed
//
//	Record (uncompressed), zig-zag varints:
//	    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
//	    headersCount varint | { headerKeyLength varint | headerKey | headerValueLength varint | headerValue }*
//
// baseOffset and partitionLeaderEpoch lie before byte 21, so the leader rewrites them in place
// without recomputing the CRC. Offsets in this package: baseOffset and LastOffset are
// inclusive, NextOffset is exclusive.
//
// # Errors
//
// Errors wrap kerr.CorruptMessage (CRC mismatch, torn or truncated bytes, a length pointing
// past the data) or kerr.InvalidRecord (bad magic or an impossible field value) and name the
// field at fault, so callers test them with errors.Is and map them to Kafka error codes.
// The checks of a produced record set before its append (CheckProduceFormat, CheckBatchSizes)
// wrap the Kafka error their rule gives (UNSUPPORTED_FOR_MESSAGE_FORMAT, MESSAGE_TOO_LARGE, ...).
// Nothing here panics on malformed input.
package records
