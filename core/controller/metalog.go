package controller

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// The metadata log's framing. The records of one controller operation (see record) are
// stored as one frame, like a RecordBatch in a segment: its length, then a checksum, then
// the bytes, a JSON array of the records. An operation is thus whole or absent after a crash
// (a CreateTopics cut between its topic and its partitions cannot be loaded). All integers
// big-endian.
//
//	+-------------------+-------------------+-----------------------------------------+
//	| length uint32 (L) | crc uint32        | payload: L bytes, [record, record, ...] |
//	+-------------------+-------------------+-----------------------------------------+
//	position 0          4                   8                                         8+L
//
//	crc = CRC-32C (Castagnoli, as RecordBatch v2) of the 4 length bytes and the payload,
//	so a flipped bit in the length is caught as well as one in the payload.
//	1 <= L <= maxFrame.
//
// Every metadata file is kept twice: metadata-G.log and metadata-G.log.mirror, and likewise
// for the snapshot. Both copies receive the same bytes at the same positions and are fsynced
// before any broker hears of the change, so frame k starts at the same offset in both. A
// frame damaged in one copy is read from the other; only damage in both copies at the same
// frame, before the tail, stops a start (see mergeCopies).
const (
	frameHeader = 8
	maxFrame    = 64 << 20
	mirrorExt   = ".mirror"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func frameCRC(lenBytes, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(lenBytes, castagnoli), castagnoli, payload)
}

// appendFrame appends payload as one frame to dst.
func appendFrame(dst, payload []byte) []byte {
	var h [frameHeader]byte
	binary.BigEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(h[4:8], frameCRC(h[0:4], payload))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// encodeBatch frames recs as one batch.
func encodeBatch(dst []byte, recs []record) ([]byte, error) {
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	return appendFrame(dst, b), nil
}

// snapshotBatch is the number of records per frame of a snapshot (a snapshot is written
// whole, by rename; frames only bound what one damaged frame spoils).
const snapshotBatch = 1000

// encodeSnapshot frames recs in batches of snapshotBatch.
func encodeSnapshot(recs []record) ([]byte, error) {
	var out []byte
	for len(recs) > 0 {
		n := min(len(recs), snapshotBatch)
		var err error
		if out, err = encodeBatch(out, recs[:n]); err != nil {
			return nil, err
		}
		recs = recs[n:]
	}
	return out, nil
}

// frameAt reads the frame at pos of data. ok is false for a frame that is incomplete, has
// an impossible length or a checksum that does not match; why then says which.
func frameAt(data []byte, pos int) (payload []byte, ok bool, why string) {
	rest := data[pos:]
	if len(rest) < frameHeader {
		return nil, false, fmt.Sprintf("%d bytes, less than a frame header", len(rest))
	}
	n := binary.BigEndian.Uint32(rest[0:4])
	switch {
	case n == 0 || n > maxFrame:
		return nil, false, fmt.Sprintf("impossible record length %d", n)
	case int64(n) > int64(len(rest)-frameHeader):
		return nil, false, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", n, len(rest)-frameHeader)
	}
	payload = rest[frameHeader : frameHeader+int(n)]
	if got, want := frameCRC(rest[0:4], payload), binary.BigEndian.Uint32(rest[4:8]); got != want {
		return nil, false, fmt.Sprintf("checksum %08x, the batch's bytes give %08x", want, got)
	}
	return payload, true, ""
}

// tornFrom reports whether the bytes of data from pos on (where a frame is not valid) can be
// what a crash leaves of the last append, which never counted (every append is fsynced
// before anyone hears of it): a frame cut short (a header or a length that runs past the
// end of the file), or a frame with zero bytes where its batch should be (the pages of an
// append that were never written read as zeros; a batch, JSON, holds no zero byte). A whole
// frame with no zero byte whose checksum fails is a damaged batch, not a torn one, even at
// the end: cutting it would drop a change brokers acted on. Damage followed by a valid frame
// is never a torn tail.
func tornFrom(data []byte, pos int) bool {
	for q := pos + 1; q+frameHeader < len(data); q++ {
		n := int(binary.BigEndian.Uint32(data[q : q+4]))
		if n == 0 || n > maxFrame || n > len(data)-q-frameHeader {
			continue
		}
		if _, ok, _ := frameAt(data, q); ok {
			return false
		}
	}
	rest := data[pos:]
	if len(rest) < frameHeader {
		return true
	}
	body := rest[frameHeader:]
	if n := int64(binary.BigEndian.Uint32(rest[0:4])); n > 0 && n <= int64(len(body)) {
		body = body[:n]
	} else if n > int64(len(body)) {
		return true // cut short
	}
	return bytes.IndexByte(body, 0) >= 0 || len(bytes.Trim(rest, "\x00")) == 0
}

// fileCopy is one copy of a metadata file as read: missing when it does not exist.
type fileCopy struct {
	name    string
	data    []byte
	missing bool
}

// merged is what mergeCopies read from the two copies of one metadata file.
type merged struct {
	payloads [][]byte
	// end is the byte length of the valid prefix (where a torn tail was cut, if any).
	end int
	// torn is the number of bytes past end in the longer copy (0: none).
	torn int
	// healed lists each frame taken from one copy because the other was damaged or missing.
	healed []string
}

// damageError is metadata damage that recovery cannot repair by itself: the same batch is
// damaged in both copies, before the tail. `isrbench metadata --repair` truncates there.
type damageError struct {
	File   string
	Offset int
	Batch  int // 1-based
	Why    string
}

func (e *damageError) Error() string {
	return fmt.Sprintf("metadata file %s is damaged at offset %d (batch %d) in both copies: %s; "+
		"run `isrbench metadata --dir %s --repair` to cut it there, which reports what the cut loses",
		e.File, e.Offset, e.Batch, e.Why, dirOf(e.File))
}

// mergeCopies reads the frames of the two copies of one metadata file in step: both copies
// hold the same frame at the same offset. A frame valid in one copy only is taken from it
// (and reported as healed); copies that both hold a valid frame at an offset must agree; at
// the first offset where neither copy has a valid frame, the rest is a torn tail if it is one
// in both copies (cut, reported), and otherwise a *damageError naming the file and offset.
func mergeCopies(a, b fileCopy) (merged, error) {
	var m merged
	if a.missing && b.missing {
		return m, nil
	}
	pos := 0
	for {
		inA, inB := pos < len(a.data), pos < len(b.data)
		if !inA && !inB {
			break
		}
		var pa, pb []byte
		var okA, okB bool
		var whyA, whyB = "end of file", "end of file"
		if inA {
			pa, okA, whyA = frameAt(a.data, pos)
		}
		if inB {
			pb, okB, whyB = frameAt(b.data, pos)
		}
		switch {
		case okA && okB:
			if !bytes.Equal(pa, pb) {
				return m, &damageError{File: a.name, Offset: pos, Batch: len(m.payloads) + 1,
					Why: "the two copies hold different valid records"}
			}
		case okA:
			if inB || !b.missing {
				m.healed = append(m.healed, fmt.Sprintf("%s offset %d: %s; taken from %s", copyName(b), pos, whyB, a.name))
			}
		case okB:
			pa = pb
			if inA || !a.missing {
				m.healed = append(m.healed, fmt.Sprintf("%s offset %d: %s; taken from %s", copyName(a), pos, whyA, b.name))
			}
		default:
			if (!inA || tornFrom(a.data, pos)) && (!inB || tornFrom(b.data, pos)) {
				m.end = pos
				m.torn = max(len(a.data), len(b.data)) - pos
				return m, nil
			}
			return m, &damageError{File: a.name, Offset: pos, Batch: len(m.payloads) + 1,
				Why: fmt.Sprintf("%s: %s; %s: %s", a.name, whyA, copyName(b), whyB)}
		}
		m.payloads = append(m.payloads, pa)
		pos += frameHeader + len(pa)
	}
	m.end = pos
	return m, nil
}

func copyName(c fileCopy) string {
	if c.missing {
		return c.name + " (missing)"
	}
	return c.name
}

// decodePayloads decodes each frame's batch of records; a frame whose checksum held but
// whose bytes are not a batch of records is damage of the writer's making, reported with
// its position.
func decodePayloads(name string, payloads [][]byte) ([]record, error) {
	var recs []record
	for i, p := range payloads {
		var batch []record
		err := json.Unmarshal(p, &batch)
		if err == nil && len(batch) == 0 {
			err = errors.New("an empty batch")
		}
		for j := range batch {
			if err == nil && batch[j].Type == "" {
				err = fmt.Errorf("record %d has no type", j+1)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("controller: metadata file %s batch %d is not a batch of metadata records (%v): the metadata is damaged", name, i+1, err)
		}
		recs = append(recs, batch...)
	}
	return recs, nil
}

// parseLegacy decodes the JSON-lines format of earlier isrbench releases (one record a
// line, no checksum): a last line without its newline is a torn append, any other bad line
// an error naming it.
func parseLegacy(data []byte, name string) (recs []record, torn int, err error) {
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return recs, len(data), nil
		}
		var r record
		if err := json.Unmarshal(data[:i], &r); err != nil || r.Type == "" {
			return nil, 0, fmt.Errorf("controller: metadata log %s line %d is not a record (%v): the metadata is damaged", name, line, err)
		}
		recs = append(recs, r)
		data = data[i+1:]
	}
	return recs, 0, nil
}

// isLegacy reports whether data is in the JSON-lines format (a frame's length would have
// to be over 2 GB to start with '{').
func isLegacy(data []byte) bool { return len(data) > 0 && data[0] == '{' }
