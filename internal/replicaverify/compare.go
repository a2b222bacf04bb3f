package replicaverify

import (
	"errors"
	"fmt"
	"strings"

	"github.com/isrbench/isrbench/core/records"
)

// Batch is what the comparison keeps of one RecordBatch v2 of a replica's log. The fields
// compared (offsets, length, leader epoch, stored CRC) are every header byte outside the CRC's
// range, and the CRC covers the rest: two valid batches equal here are byte-identical.
type Batch struct {
	BaseOffset  int64  // first offset of the batch, inclusive
	LastOffset  int64  // last offset of the batch, inclusive
	Length      int    // bytes on disk and on the wire (12 + batchLength)
	LeaderEpoch int32  // partitionLeaderEpoch
	CRC         uint32 // the stored crc field
	// Err is set when the batch failed validation (a CRC that does not match its bytes, a
	// bad header); the batches after it are not parsed.
	Err error
}

// ParseBatches appends the batches of b (a fetch response's records, or a segment's bytes)
// to dst, skipping those that end below from (a fetch may start inside a batch). A trailing
// partial batch is left out (a fetch cuts the last batch at its byte limit). A batch that
// fails validation is appended with Err set and ends the parse: ok is false then.
func ParseBatches(dst []Batch, b []byte, from int64) (_ []Batch, ok bool) {
	for pos := 0; pos < len(b); {
		rest := b[pos:]
		if len(rest) < records.HeaderSize {
			return dst, true // a partial header at the end of a fetch
		}
		h, err := records.ParseHeader(rest)
		if err != nil {
			return append(dst, Batch{BaseOffset: h.BaseOffset, LastOffset: h.BaseOffset, Err: errors.New(brief(err))}), false
		}
		if h.Size() > len(rest) {
			return dst, true // a partial batch at the end of a fetch
		}
		bt := Batch{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Length: h.Size(), LeaderEpoch: h.PartitionLeaderEpoch, CRC: h.CRC}
		if _, err := records.Validate(rest); err != nil {
			bt.Err = errors.New(brief(err))
			if bt.LastOffset >= from {
				return append(dst, bt), false
			}
		}
		if bt.LastOffset >= from {
			dst = append(dst, bt)
		}
		pos += h.Size()
	}
	return dst, true
}

// brief is a records error without the Kafka error's description that ends it.
func brief(err error) string {
	s := strings.TrimPrefix(err.Error(), "records: ")
	for _, code := range []string{": CORRUPT_MESSAGE", ": INVALID_RECORD"} {
		if i := strings.Index(s, code); i >= 0 {
			return s[:i]
		}
	}
	return s
}

// Divergence is the first place where two replicas of a partition disagree.
type Divergence struct {
	Topic     string
	Partition int32
	// Offset is the base offset of the reference replica's batch where they disagree (the
	// first offset not verified).
	Offset int64
	// Field is what differs: "offset", "length", "leader epoch", "checksum" (the stored CRC),
	// or "corrupt" (Replica's batch fails its own CRC or header check).
	Field string
	// Reference is the replica compared against (the leader when it could be read); Replica
	// the one that differs (for "corrupt", the replica whose batch is corrupt, possibly the
	// reference itself).
	Reference, Replica int32
	// Want and Got are the values of Field on Reference and Replica ("corrupt": the error).
	Want, Got string
}

func (d Divergence) String() string {
	if d.Field == "corrupt" {
		return fmt.Sprintf("partition %s-%d: replica %d has a corrupt batch at offset %d: %s", d.Topic, d.Partition, d.Replica, d.Offset, d.Got)
	}
	return fmt.Sprintf("partition %s-%d: replica %d diverges from replica %d at offset %d: %s %s, want %s",
		d.Topic, d.Partition, d.Replica, d.Reference, d.Offset, d.Field, d.Got, d.Want)
}

// compareBatch compares b (on replica id) with the reference batch want (on ref); it returns
// the field that differs and both values, or "" when they are the same batch.
func compareBatch(want, b Batch) (field, w, g string) {
	switch {
	case want.BaseOffset != b.BaseOffset || want.LastOffset != b.LastOffset:
		return "offset", fmt.Sprintf("[%d, %d]", want.BaseOffset, want.LastOffset), fmt.Sprintf("[%d, %d]", b.BaseOffset, b.LastOffset)
	case want.Length != b.Length:
		return "length", fmt.Sprint(want.Length), fmt.Sprint(b.Length)
	case want.LeaderEpoch != b.LeaderEpoch:
		return "leader epoch", fmt.Sprint(want.LeaderEpoch), fmt.Sprint(b.LeaderEpoch)
	case want.CRC != b.CRC:
		return "checksum", fmt.Sprintf("%#08x", want.CRC), fmt.Sprintf("%#08x", b.CRC)
	}
	return "", "", ""
}

// Cursor is one replica's side of a partition's comparison: the batches fetched and not yet
// compared, from Next on, bounded by the replica's HW (exclusive). Owned by one comparison.
type Cursor struct {
	Broker int32
	HW     int64   // the replica's high watermark: batches whose last offset reaches it are not compared
	Next   int64   // the next offset to fetch (after the last batch buffered)
	Buf    []Batch // fetched, not yet compared
	// Stuck is set when the replica's log cannot be read past Buf (a corrupt batch, a fetch
	// error): the comparison stops at its end.
	Stuck bool
	// Why is set with Stuck when the replica's log is damaged there: a fetch below its HW
	// that returned no whole batch (a corrupt batch length). Step reports it as "corrupt".
	Why string
}

// Add appends the batches of a fetch response's records (fetched at c.Next) and moves Next
// past them. It reports whether anything was added.
func (c *Cursor) Add(recs []byte) bool {
	n := len(c.Buf)
	var ok bool
	c.Buf, ok = ParseBatches(c.Buf, recs, c.Next)
	if !ok {
		c.Stuck = true
	}
	if len(c.Buf) > n {
		c.Next = c.Buf[len(c.Buf)-1].LastOffset + 1
		return true
	}
	if ok && c.Next < c.HW {
		c.Stuck = true
		c.Why = fmt.Sprintf("a read at offset %d below its HW %d returned %d bytes and no whole batch (a corrupt batch length?)", c.Next, c.HW, len(recs))
	}
	return false
}

// Exhausted reports whether the cursor has no batch to compare and cannot get one: its next
// offset reached its HW, or its log cannot be read further.
func (c *Cursor) Exhausted() bool {
	return len(c.Buf) == 0 && (c.Stuck || c.Next >= c.HW)
}

// errNeedMore is returned by Step when some cursor's buffer is empty and must be refilled.
var errNeedMore = errors.New("need more batches")

// Step compares the head batches of every cursor against cs[ref]'s, Kafka's way: it stops
// (done) as soon as one replica has no batch left below its HW, so the logs are verified up
// to the smallest HW; a batch whose last offset reaches its replica's HW is not compared.
// It returns the verified end (exclusive) after the compared batch, a divergence, or
// errNeedMore naming the cursors to refill (those with an empty buffer that can still grow).
func Step(topic string, partition int32, cs []*Cursor, ref int) (verifiedTo int64, d *Divergence, done bool, err error) {
	for _, c := range cs {
		if len(c.Buf) == 0 {
			if c.Why != "" {
				return 0, &Divergence{Topic: topic, Partition: partition, Offset: c.Next, Field: "corrupt",
					Reference: cs[ref].Broker, Replica: c.Broker, Got: c.Why}, true, nil
			}
			if c.Exhausted() {
				return 0, nil, true, nil
			}
			return 0, nil, false, errNeedMore
		}
	}
	for _, c := range cs {
		if c.Buf[0].Err != nil {
			return 0, &Divergence{Topic: topic, Partition: partition, Offset: c.Buf[0].BaseOffset, Field: "corrupt",
				Reference: cs[ref].Broker, Replica: c.Broker, Got: c.Buf[0].Err.Error()}, true, nil
		}
		if c.Buf[0].LastOffset >= c.HW {
			return 0, nil, true, nil // only up to the HW
		}
	}
	want := cs[ref].Buf[0]
	for _, c := range cs {
		if field, w, g := compareBatch(want, c.Buf[0]); field != "" {
			return 0, &Divergence{Topic: topic, Partition: partition, Offset: min(want.BaseOffset, c.Buf[0].BaseOffset), Field: field,
				Reference: cs[ref].Broker, Replica: c.Broker, Want: w, Got: g}, true, nil
		}
	}
	for _, c := range cs {
		c.Buf = c.Buf[1:]
	}
	return want.LastOffset + 1, nil, false, nil
}
