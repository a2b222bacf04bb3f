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

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

func init() {
	register("dump-log", "print every batch of a segment file, or the entries of a .txnindex (kafka-dump-log.sh / DumpLogSegments)", cmdDumpLog)
}

var codecNames = map[int8]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

// cmdDumpLog prints each RecordBatch of a .log segment file like Kafka's
// DumpLogSegments, checked the way recovery checks it (log.SegmentWalker). A
// batch recovery would truncate at (CRC mismatch, offsets not contiguous from
// the file name's base offset) is printed with isvalid: false and makes the
// command exit 1; a batch that cannot be parsed or is cut short stops the dump
// with an error naming its position. A .txnindex file (the aborted-transactions index)
// is printed one entry a line, as Kafka prints it; a damaged one is an error naming the entry.
func cmdDumpLog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump-log", "dump-log PATH.log|PATH.txnindex", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("dump-log: exactly one segment file path is required")
	}
	if strings.HasSuffix(fs.Arg(0), ".txnindex") {
		return dumpTxnIndex(fs.Arg(0), stdout)
	}
	return dumpSegment(fs.Arg(0), stdout)
}

// dumpTxnIndex prints the entries of a .txnindex file as Kafka's DumpLogSegments does.
func dumpTxnIndex(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Dumping %s\n", path)
	ents, err := log.DecodeTxnIndex(b)
	if err != nil {
		return fmt.Errorf("dump-log: %s: %w", path, err)
	}
	for _, a := range ents {
		fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
	}
	return nil
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
	fmt.Fprintf(w, "Dumping %s\n", path)
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	if err == nil {
		fmt.Fprintf(w, "Log starting offset: %d\n", base)
	} else {
		base = -1 // not a segment name: offsets start at the first batch's
	}
	var (
		invalid  int
		firstBad error
	)
	walk := log.NewSegmentWalker(f, filepath.Base(path), st.Size(), base)
	for walk.Next() {
		b := walk.Batch()
		if b.Err != nil {
			invalid++
			if firstBad == nil {
				firstBad = b.Err
			}
		}
		h := b.Header
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
			h.IsTransactional(), h.IsControl(), b.Position, h.MaxTimestamp, b.Size, h.Magic, codec, h.CRC, b.Err == nil)
		if h.IsControl() && b.Err == nil {
			printMarker(w, f, b)
		}
	}
	var tail *log.CorruptTailError
	if err := walk.Err(); errors.As(err, &tail) {
		return &exitError{code: 1, err: fmt.Errorf("dump-log: %s: corrupt tail, recovery would truncate %d bytes: %w", path, tail.Bytes, err)}
	} else if err != nil {
		return fmt.Errorf("dump-log: %s: %w", path, err)
	}
	if invalid > 0 {
		return &exitError{code: 1, err: fmt.Errorf("dump-log: %s: %d invalid batch(es), recovery would truncate the log at the first: %w", path, invalid, firstBad)}
	}
	return nil
}

// printMarker prints a control batch's record as DumpLogSegments does with --deep-iteration:
// its transaction marker (endTxnMarker: COMMIT or ABORT, and the coordinator epoch).
func printMarker(w io.Writer, f *os.File, b log.SegmentBatch) {
	buf := make([]byte, b.Size)
	if _, err := f.ReadAt(buf, b.Position); err != nil {
		fmt.Fprintf(w, "| offset: %d control record unreadable: %v\n", b.Header.BaseOffset, err)
		return
	}
	m, err := records.ParseMarker(buf)
	if err != nil {
		fmt.Fprintf(w, "| offset: %d control record: %v\n", b.Header.BaseOffset, err)
		return
	}
	fmt.Fprintf(w, "| offset: %d CreateTime: %d keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: %s coordinatorEpoch: %d\n",
		b.Header.BaseOffset, b.Header.MaxTimestamp, m, m.CoordinatorEpoch)
}
