package controller

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/isrbench/isrbench/core/vfs"
)

// MetadataReport is what CheckMetadata found in a metadata directory, or what
// RepairMetadata did to it.
type MetadataReport struct {
	Dir        string
	Generation int
	// Lines describe each file of the generation: records, torn tails, frames one copy
	// had to supply for the other, damage.
	Lines []string
	// Damage is the damage Open refuses to start with (nil: Open would start).
	Damage *DamageInfo
	// Cut is set by RepairMetadata: what it cut.
	Cut *DamageInfo
	// Lost describes each record after the cut that the repair dropped (as far as the
	// bytes after the damage still hold whole records).
	Lost []string
}

// DamageInfo locates a record damaged in both copies of a metadata file.
type DamageInfo struct {
	File   string
	Offset int
	Batch  int // 1-based
	Why    string
}

// CheckMetadata reads the metadata directory dir (fsys nil: the OS) as Open would, without
// changing anything, and reports what it holds and what Open would repair or refuse.
func CheckMetadata(fsys vfs.FS, dir string) (MetadataReport, error) {
	fsys = vfs.Or(fsys)
	rep := MetadataReport{Dir: dir}
	snaps, _, err := generations(fsys, dir)
	if err != nil {
		return rep, fmt.Errorf("metadata dir %s: %w", dir, err)
	}
	if len(snaps) > 0 {
		rep.Generation = snaps[len(snaps)-1]
	}
	files := []string{logName(dir, rep.Generation)}
	if rep.Generation > 0 {
		files = []string{snapName(dir, rep.Generation), files[0]}
	}
	for _, path := range files {
		recs, m, legacy, err := readCopies(fsys, path)
		var de *damageError
		switch {
		case errors.As(err, &de):
			rep.Damage = &DamageInfo{File: de.File, Offset: de.Offset, Batch: de.Batch, Why: de.Why}
			rep.Lines = append(rep.Lines, fmt.Sprintf("%s: DAMAGED at offset %d (batch %d) in both copies: %s", filepath.Base(path), de.Offset, de.Batch, de.Why))
			continue
		case err != nil:
			return rep, err
		}
		line := fmt.Sprintf("%s: %d records in %d batches, %d bytes", filepath.Base(path), len(recs), len(m.payloads), m.end)
		if legacy {
			line += " (older JSON-lines format, one copy)"
		}
		if m.torn > 0 {
			line += fmt.Sprintf("; a torn tail of %d bytes at offset %d (Open cuts it)", m.torn, m.end)
		}
		rep.Lines = append(rep.Lines, line)
		for _, h := range m.healed {
			rep.Lines = append(rep.Lines, "  "+h+" (Open rewrites both copies)")
		}
	}
	if rep.Damage != nil && rep.Damage.File == snapName(dir, rep.Generation) {
		// Open rebuilds a damaged snapshot from the previous generation when it can.
		st := &store{fs: fsys, dir: dir}
		if _, notes, err := st.loadBase(rep.Generation); err == nil {
			rep.Lines = append(rep.Lines, "  "+notes[0]+" (Open does this by itself)")
			rep.Damage = nil
		}
	}
	return rep, nil
}

// RepairMetadata cuts the metadata log of dir where a record is damaged in both copies, so
// that Open can start: both copies are truncated to the last whole record before the damage.
// Every batch after the cut is lost, and Lost says which (a lost partition record can
// make a replica that is no longer in sync lead again: check the replicas before producing).
// A damaged snapshot that the previous generation cannot rebuild is not repaired (there is
// nothing whole to restore from). Without damage it changes nothing.
func RepairMetadata(fsys vfs.FS, dir string) (MetadataReport, error) {
	fsys = vfs.Or(fsys)
	rep, err := CheckMetadata(fsys, dir)
	if err != nil || rep.Damage == nil {
		return rep, err
	}
	d := rep.Damage
	if d.File != logName(dir, rep.Generation) {
		return rep, fmt.Errorf("metadata snapshot %s is damaged in both copies and generation %d cannot rebuild it: no whole state to restore from", d.File, rep.Generation-1)
	}
	for _, p := range bothCopies(d.File) {
		data, err := vfs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		if len(rep.Lost) == 0 {
			rep.Lost = describeAfter(data, d.Offset)
		}
		f, err := fsys.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return rep, fmt.Errorf("repair %s: %w", p, err)
		}
		err = f.Truncate(int64(d.Offset))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return rep, fmt.Errorf("repair %s: %w", p, err)
		}
	}
	rep.Cut = d
	rep.Damage = nil
	return rep, nil
}

// describeAfter describes the whole records found in data after the damaged frame at pos
// (the first valid frame after it, then frame by frame), and the damaged one.
func describeAfter(data []byte, pos int) []string {
	out := []string{fmt.Sprintf("the damaged batch at offset %d", pos)}
	if pos+frameHeader <= len(data) {
		// Its bytes may still read as records (a flipped bit in a value): say which, as read.
		if n := int(binary.BigEndian.Uint32(data[pos : pos+4])); n <= len(data)-pos-frameHeader {
			var batch []record
			if json.Unmarshal(data[pos+frameHeader:pos+frameHeader+n], &batch) == nil {
				for _, r := range batch {
					out = append(out, describeRecord(r)+" (as the damaged batch reads)")
				}
			}
		}
	}
	q := pos + 1
	for ; q+frameHeader < len(data); q++ {
		if _, ok, _ := frameAt(data, q); ok {
			break
		}
	}
	for q+frameHeader < len(data) {
		p, ok, _ := frameAt(data, q)
		if !ok {
			out = append(out, fmt.Sprintf("%d bytes from offset %d that are no whole batch", len(data)-q, q))
			break
		}
		var batch []record
		if json.Unmarshal(p, &batch) == nil {
			for _, r := range batch {
				out = append(out, describeRecord(r))
			}
		}
		q += frameHeader + int(binary.BigEndian.Uint32(data[q:q+4]))
	}
	return out
}

func describeRecord(r record) string {
	switch {
	case r.Partition != nil:
		return fmt.Sprintf("partition %s-%d: leader %d, leader epoch %d, ISR %v", r.Partition.Topic, r.Partition.Partition, r.Partition.Leader, r.Partition.LeaderEpoch, r.Partition.ISR)
	case r.Type == "delete-topic" && r.Topic != nil:
		return "deletion of topic " + r.Topic.Name
	case r.Topic != nil:
		return fmt.Sprintf("topic %s (%d partitions)", r.Topic.Name, r.Topic.Partitions)
	case r.Broker != nil:
		return fmt.Sprintf("registration of broker %d (broker epoch %d)", r.Broker.ID, r.Broker.Epoch)
	case r.Damaged != nil:
		return fmt.Sprintf("damaged replicas %v of %s-%d", r.Damaged.Brokers, r.Damaged.Topic, r.Damaged.Partition)
	case r.BrokerConfig != nil:
		return fmt.Sprintf("dynamic broker configs of %q", r.BrokerConfig.Resource)
	}
	return "a record of type " + r.Type
}
