package netfetch

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/isrbench/isrbench/core/broker"
)

// fetchEncoder builds a Fetch response (v4..v13) without the record bytes:
// buf holds the size prefix, response header and every field, and marks[i]
// is the position in buf right after partition i's records length, where
// its records (Partitions[i].Records, Size bytes) belong on the wire.
// The buffers are reused; encode allocates nothing once they have grown.
type fetchEncoder struct {
	buf   []byte
	marks []int
	total int64 // size prefix value: len(buf)-4 + sum of record sizes
}

// maxFetchResponse bounds a response so that the int32 size prefix and
// record lengths cannot overflow.
const maxFetchResponse = 1<<31 - 1

// encode builds the response to a Fetch of version: the partitions parts grouped by spans,
// or, with topErr set, a whole-response error without partitions; sessionID is the fetch
// session the response belongs to (0: none; v7+).
func (e *fetchEncoder) encode(version int16, corr int32, topErr int16, sessionID int32, parts []broker.FetchPartition, spans []topicSpan) error {
	if version < 4 || version > 13 {
		return fmt.Errorf("BUG: Fetch response v%d not supported by the encoder", version)
	}
	flex := version >= 12
	b := append(e.buf[:0], 0, 0, 0, 0) // size, patched below
	b = kbin.AppendInt32(b, corr)
	if flex {
		b = append(b, 0) // response header v1: no tagged fields
	}
	b = kbin.AppendInt32(b, 0) // throttle_time_ms (v1+)
	if version >= 7 {
		b = kbin.AppendInt16(b, topErr)
		b = kbin.AppendInt32(b, sessionID) // 0 = no fetch session
	}
	b = appendArrayLen(b, len(spans), flex)
	marks := e.marks[:0]
	var records int64
	for _, sp := range spans {
		switch {
		case version >= 13:
			b = append(b, sp.id[:]...) // topic_id (KIP-516)
		case flex:
			b = kbin.AppendCompactString(b, sp.topic)
		default:
			b = kbin.AppendString(b, sp.topic)
		}
		b = appendArrayLen(b, sp.end-sp.start, flex)
		for i := sp.start; i < sp.end; i++ {
			p := &parts[i]
			b = kbin.AppendInt32(b, p.Partition)
			b = kbin.AppendInt16(b, errCode(p.Err))
			hw, lso, ls := p.HighWatermark, p.LastStableOffset, p.LogStartOffsetOut
			if p.Err != nil {
				hw, lso, ls = -1, -1, -1
			}
			b = kbin.AppendInt64(b, hw)
			b = kbin.AppendInt64(b, lso) // v4+
			if version >= 5 {
				b = kbin.AppendInt64(b, ls)
			}
			switch ab := p.AbortedTransactions; {
			case len(ab) == 0 || p.Err != nil: // aborted_transactions: null
				if flex {
					b = append(b, 0)
				} else {
					b = kbin.AppendInt32(b, -1)
				}
			default:
				b = appendArrayLen(b, len(ab), flex)
				for _, a := range ab {
					b = kbin.AppendInt64(b, a.ProducerID)
					b = kbin.AppendInt64(b, a.FirstOffset)
					if flex {
						b = append(b, 0)
					}
				}
			}
			if version >= 11 {
				b = kbin.AppendInt32(b, -1) // preferred_read_replica
			}
			n := p.Records.Size
			if p.Err != nil || n < 0 {
				n = 0
			}
			if n > 0 && p.Records.File == nil {
				return fmt.Errorf("BUG: fetch of %s-%d returned a %d-byte slice without a file", p.Topic, p.Partition, n)
			}
			records += n
			if records > maxFetchResponse {
				return fmt.Errorf("fetch response records exceed %d bytes", maxFetchResponse)
			}
			if flex {
				b = kbin.AppendUvarint(b, uint32(n+1))
			} else {
				b = kbin.AppendInt32(b, int32(n))
			}
			marks = append(marks, len(b))
			if flex {
				if p.DivergingEndOffset >= 0 {
					b = append(b, 1, 0, 13) // 1 tag: tag 0 (diverging_epoch), 13 bytes
					b = kbin.AppendInt32(b, p.DivergingEpoch)
					b = kbin.AppendInt64(b, p.DivergingEndOffset)
					b = append(b, 0)
				} else {
					b = append(b, 0)
				}
			}
		}
		if flex {
			b = append(b, 0) // topic tagged fields
		}
	}
	if flex {
		b = append(b, 0) // response tagged fields
	}
	total := int64(len(b)-4) + records
	if total > maxFetchResponse {
		return fmt.Errorf("fetch response of %d bytes exceeds the int32 size prefix", total)
	}
	binary.BigEndian.PutUint32(b[:4], uint32(total))
	e.buf, e.marks, e.total = b, marks, total
	return nil
}

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendUvarint(b, uint32(n+1))
	}
	return kbin.AppendInt32(b, int32(n))
}
