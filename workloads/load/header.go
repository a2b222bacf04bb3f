package load

import (
	"encoding/binary"
	"fmt"

	"github.com/isrbench/isrbench/workloads/spec"
)

// Record value layout (little endian), HeaderSize bytes followed by filler up to message.size:
//
//	0       4            8                16                        24
//	+-------+------------+----------------+-------------------------+---------
//	| magic | producer id|      seq       | intended send, unix ns  | filler..
//	+-------+------------+----------------+-------------------------+---------
//
// magic is HeaderMagic ("ISRB"); producer id is unique per producer and run; seq counts the
// Producer's records from 0; the intended send time is the open-loop schedule slot the
// record was meant for (latencies are measured from it).
const (
	HeaderSize  = spec.MinMessageSize
	HeaderMagic = 0x42525349 // "ISRB" little endian
)

// Header is the decoded record header.
type Header struct {
	ProducerID uint32
	Seq        uint64
	Intended   int64 // unix ns
}

// PutHeader writes h into b[:HeaderSize]; b must be at least HeaderSize long.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], HeaderMagic)
	binary.LittleEndian.PutUint32(b[4:], h.ProducerID)
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(h.Intended))
}

// ParseHeader decodes a record value written by PutHeader; an error for anything else
// (records of other writers in a shared topic are skipped by callers).
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("record value of %d bytes is shorter than the %d-byte isrbench header", len(b), HeaderSize)
	}
	if m := binary.LittleEndian.Uint32(b); m != HeaderMagic {
		return Header{}, fmt.Errorf("record value magic %#x is not isrbench's %#x", m, HeaderMagic)
	}
	return Header{
		ProducerID: binary.LittleEndian.Uint32(b[4:]),
		Seq:        binary.LittleEndian.Uint64(b[8:]),
		Intended:   int64(binary.LittleEndian.Uint64(b[16:])),
	}, nil
}
