package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/records"
)

func init() {
	register("dump-log", "print every batch of a segment file (kafka-dump-log.sh / DumpLogSegments)", cmdDumpLog)
}

var codecNames = map[int8]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

// cmdDumpLog prints each RecordBatch of a .log segment file like Kafka's
// DumpLogSegments. A batch whose CRC does not match is printed with
// isvalid: false and makes the command exit 1; a batch that cannot be
// parsed or is cut short stops the dump with an error naming its position.
func cmdDumpLog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump-log", "dump-log PATH.log", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("dump-log: exactly one segment file path is required")
	}
	return dumpSegment(fs.Arg(0), stdout)
}

func dumpSegment(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return usagef("dump-log: %s is a directory, want a .log segment file", path)
	}
	size := st.Size()
	fmt.Fprintf(w, "Dumping %s\n", path)
	if base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64); err == nil {
		fmt.Fprintf(w, "Log starting offset: %d\n", base)
	}
	var (
		pos        int64
		lastOffset int64 = -1
		invalid    int
		firstBad   string
		hdr        = make([]byte, records.HeaderSize)
		buf        []byte
	)
	for pos < size {
		if size-pos < records.HeaderSize {
			return &exitError{code: 1, err: fmt.Errorf("dump-log: %s: corrupt tail: %d bytes at position %d (after offset %d) are shorter than a batch header (%d bytes)", path, size-pos, pos, lastOffset, records.HeaderSize)}
		}
		if _, err := f.ReadAt(hdr, pos); err != nil {
			return fmt.Errorf("dump-log: %s: read at position %d: %w", path, pos, err)
		}
		h, err := records.ParseHeader(hdr)
		if err != nil {
			return &exitError{code: 1, err: fmt.Errorf("dump-log: %s: corrupt batch at position %d (after offset %d): %w", path, pos, lastOffset, err)}
		}
		n := int64(h.Size())
		if pos+n > size {
			return &exitError{code: 1, err: fmt.Errorf("dump-log: %s: torn batch at position %d (baseOffset %d): size %d but only %d bytes left in the file", path, pos, h.BaseOffset, n, size-pos)}
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := f.ReadAt(b, pos); err != nil {
			return fmt.Errorf("dump-log: %s: read at position %d: %w", path, pos, err)
		}
		valid := true
		if _, err := records.Validate(b); err != nil {
			valid = false
			invalid++
			if firstBad == "" {
				firstBad = fmt.Sprintf("position %d (baseOffset %d): %v", pos, h.BaseOffset, err)
			}
		}
		lastSeq := int32(-1)
		if h.BaseSequence >= 0 {
			lastSeq = h.BaseSequence + h.LastOffsetDelta
		}
		codec := codecNames[h.Compression()]
		if codec == "" {
			codec = fmt.Sprintf("unknown(%d)", h.Compression())
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t position: %d CreateTime: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.RecordsCount, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch, h.PartitionLeaderEpoch,
			h.IsTransactional(), h.IsControl(), pos, h.MaxTimestamp, n, h.Magic, codec, h.CRC, valid)
		lastOffset = h.LastOffset()
		pos += n
	}
	if invalid > 0 {
		return &exitError{code: 1, err: errors.New("dump-log: " + path + ": " + strconv.Itoa(invalid) + " batch(es) failed the CRC check; first at " + firstBad)}
	}
	return nil
}
