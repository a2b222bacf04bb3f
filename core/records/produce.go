package records

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The checks of a produced record set that come before the append (the log's own, Validate
// and the segment size, come with it). Each is Kafka's, in the order Kafka applies them.

// CheckProduceFormat checks the format of the records of one partition of a Produce request
// of the given version, as Kafka's ProduceRequest.validateRecords: message sets of magic 0/1,
// which Produce v0-v2 carry, are refused with UNSUPPORTED_FOR_MESSAGE_FORMAT (isrbench stores
// RecordBatch v2 only), any magic but 2 from v3 on with INVALID_RECORD, and zstd before
// Produce v7 with UNSUPPORTED_COMPRESSION_TYPE. Records too short to hold a magic byte pass:
// the log refuses them as corrupt.
func CheckProduceFormat(version int16, b []byte) error {
	if len(b) <= offMagic {
		return nil
	}
	if magic := b[offMagic]; magic != 2 {
		if version < 3 {
			return fmt.Errorf("message format v%d (Produce v%d) is not supported: isrbench stores RecordBatch v2 (message format 2, Produce v3 and later) only: %w",
				magic, version, kerr.UnsupportedForMessageFormat)
		}
		return fmt.Errorf("Produce v%d may only carry record batches with magic 2, got magic %d: %w", version, magic, kerr.InvalidRecord)
	}
	if version < 7 && len(b) > offAttributes+1 && b[offAttributes+1]&CompressionMask == CompressionZstd {
		return fmt.Errorf("zstd needs Produce v7 or later, got v%d: %w", version, kerr.UnsupportedCompressionType)
	}
	return nil
}

// CheckBatchSizes checks that no record batch of b is larger than maxBytes (the topic's
// max.message.bytes, else the broker's message.max.bytes), as Kafka's LogValidator does:
// MESSAGE_TOO_LARGE. It reads only the batch lengths (a torn or corrupt batch is the log's
// to refuse) and allocates nothing.
func CheckBatchSizes(b []byte, maxBytes int64) error {
	if int64(len(b)) <= maxBytes {
		return nil // no batch can be larger
	}
	for pos := 0; pos+offBatchLength+4 <= len(b); {
		size := offPartitionLeaderEpoch + int64(binary.BigEndian.Uint32(b[pos+offBatchLength:]))
		if size > maxBytes {
			return fmt.Errorf("the record batch at byte %d is %d bytes, more than max.message.bytes %d: %w", pos, size, maxBytes, kerr.MessageTooLarge)
		}
		pos += int(size)
	}
	return nil
}
