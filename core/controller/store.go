package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// The metadata log: what KRaft's __cluster_metadata log is to Kafka. Every controller
// operation appends the records of what it changed and fsyncs them before any broker hears
// of the change. Files in Config.Dir, for generation G, each kept twice (the second copy
// with the suffix .mirror, see metalog.go for the framing):
//
//	metadata-G.snapshot   the whole state when generation G began (absent for G = 0)
//	metadata-G.log        records appended since, one checksummed frame each
//
// A record holds the whole new value of one thing (a broker registration, a topic, a
// partition state, a partition's damaged replicas, a topic deletion, the dynamic configs of
// one broker-config resource), so replaying a log over its snapshot in order gives the
// state. When the log grows past max(compactMinBytes, 4 x the snapshot) the controller
// writes generation G+1's snapshot (temp file, fsync, rename, fsync dir), starts an empty
// log and removes generation G-1: generation G stays as the fallback of G+1's snapshot
// (G's snapshot plus G's whole log is G+1's snapshot).
//
// Open loads the newest generation that has a snapshot. A frame damaged in one copy is read
// from the other; a torn tail (a crash during an append) is cut and reported with the file
// and offset; a snapshot damaged in both copies is rebuilt from the previous generation; a
// record damaged in both copies before the tail stops the start with its file and offset
// (`isrbench metadata --repair` cuts the log there, saying what that loses). Whenever a copy
// was healed, the format was the older JSON lines, or a fallback was used, Open writes a new
// generation at once, so both copies are whole again.
//
// A failed write or fsync leaves the log's tail uncertain (after a failed fsync Linux may
// drop the dirty pages and report the next fsync as clean): the controller rolls the change
// back, and the next change first writes a new generation from the state known durable.

const compactMinBytes = 1 << 20

// record is one frame of the metadata log.
type record struct {
	Type         string              `json:"type"` // broker | topic | partition | damaged | delete-topic | broker-config
	Broker       *brokerRecord       `json:"broker,omitempty"`
	BrokerConfig *brokerConfigRecord `json:"broker_config,omitempty"`
	Topic        *topicRecord        `json:"topic,omitempty"`
	Partition    *PartitionState     `json:"partition,omitempty"`
	Damaged      *damagedRecord      `json:"damaged,omitempty"`
	ScramUser    *scramUserRecord    `json:"scram_user,omitempty"` // users.go
}

type brokerRecord struct {
	ID    int32  `json:"id"`
	Epoch int64  `json:"epoch"`
	Host  string `json:"host"`
	Port  int32  `json:"port"`
}

type topicRecord struct {
	Name string `json:"name"`
	// ID is the topic's creation number (its TopicID); 0 in records written before topic
	// ids existed.
	ID int64 `json:"id,omitempty"`
	// TopicID is the topic's id (TopicID.String form); "" in records written before topic
	// ids were random (the topic then gets derivedTopicID(Name, ID)).
	TopicID    string            `json:"topic_id,omitempty"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	// Created is the controller's topic-creation count after this topic was created
	// (replica placement of the next topic starts from it).
	Created int `json:"created"`
}

// brokerConfigRecord holds the whole set of dynamic configs of one broker-config resource
// ("" the cluster-wide default, "<id>" one broker); an empty set removes the resource.
type brokerConfigRecord struct {
	Resource string            `json:"resource"`
	Configs  map[string]string `json:"configs,omitempty"`
}

type damagedRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Brokers   []int32 `json:"brokers"`
}

// Recovery reports what Open loaded from the metadata log.
type Recovery struct {
	Dir        string
	Generation int
	Records    int // records replayed (snapshot and log)
	Topics     int
	Partitions int
	Brokers    int
	// TruncatedBytes is the size of a torn tail cut from the log (0: clean).
	TruncatedBytes int64
	// Reason says what was repaired ("" if nothing): each cut, healed copy or fallback,
	// with its file and offset.
	Reason string
}

func (r Recovery) String() string {
	if r.Dir == "" {
		return "metadata in memory only"
	}
	s := fmt.Sprintf("metadata log %s generation %d: %d records, %d topics, %d partitions, %d brokers",
		r.Dir, r.Generation, r.Records, r.Topics, r.Partitions, r.Brokers)
	if r.TruncatedBytes > 0 {
		s += fmt.Sprintf(", cut a torn tail of %d bytes", r.TruncatedBytes)
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// store is the open metadata log. Used under Controller.mu.
type store struct {
	fs       vfs.FS
	dir      string
	gen      int
	logs     [2]vfs.File // the log and its mirror
	size     int64       // bytes of whole, fsynced frames in each copy
	snapSize int64
	// failed is the error of a write, fsync or compaction whose outcome on disk is
	// uncertain: the next append first writes a new generation from the durable state.
	failed error
}

func snapName(dir string, g int) string {
	return filepath.Join(dir, "metadata-"+strconv.Itoa(g)+".snapshot")
}
func logName(dir string, g int) string { return filepath.Join(dir, "metadata-"+strconv.Itoa(g)+".log") }

// bothCopies is a metadata file's path and its mirror's.
func bothCopies(path string) [2]string { return [2]string{path, path + mirrorExt} }

func dirOf(path string) string { return filepath.Dir(path) }

// generations lists the generations with a snapshot or a log (either copy) in dir, ascending.
func generations(fsys vfs.FS, dir string) (snaps, logs []int, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "metadata-")
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, mirrorExt)
		for ext, into := range map[string]*[]int{".snapshot": &snaps, ".log": &logs} {
			if num, ok := strings.CutSuffix(rest, ext); ok {
				if g, err := strconv.Atoi(num); err == nil && g >= 0 && !slices.Contains(*into, g) {
					*into = append(*into, g)
				}
			}
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	return snaps, logs, nil
}

// readCopies reads both copies of a metadata file and returns its records. A file in the
// JSON-lines format of earlier releases is read from its first copy (legacy is then true).
func readCopies(fsys vfs.FS, path string) (recs []record, m merged, legacy bool, err error) {
	var cp [2]fileCopy
	for i, p := range bothCopies(path) {
		cp[i].name = p
		data, err := vfs.ReadFile(fsys, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			cp[i].missing = true
		case err != nil:
			return nil, m, false, fmt.Errorf("controller: metadata file %s: %w", p, err)
		}
		cp[i].data = data
	}
	if isLegacy(cp[0].data) {
		recs, torn, err := parseLegacy(cp[0].data, path)
		return recs, merged{end: len(cp[0].data) - torn, torn: torn}, true, err
	}
	m, err = mergeCopies(cp[0], cp[1])
	if err != nil {
		return nil, m, false, err
	}
	recs, err = decodePayloads(path, m.payloads)
	return recs, m, false, err
}

// opened is what openStore read: the records to replay, and whether a new generation must
// be written at once (a copy was healed, the format was older, or a fallback was used).
type opened struct {
	recs []record
	heal bool
}

func openStore(fsys vfs.FS, dir string) (*store, opened, Recovery, error) {
	rec := Recovery{Dir: dir}
	var o opened
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return nil, o, rec, fmt.Errorf("controller: metadata dir %s: %w", dir, err)
	}
	snaps, logs, err := generations(fsys, dir)
	if err != nil {
		return nil, o, rec, fmt.Errorf("controller: metadata dir %s: %w", dir, err)
	}
	st := &store{fs: fsys, dir: dir}
	if len(snaps) > 0 {
		st.gen = snaps[len(snaps)-1]
	}
	var notes []string
	base, baseNotes, err := st.loadBase(st.gen)
	if err != nil {
		return nil, o, rec, err
	}
	notes = append(notes, baseNotes...)
	path := logName(dir, st.gen)
	recs, m, legacy, err := readCopies(fsys, path)
	if err != nil {
		return nil, o, rec, err
	}
	o.recs = append(base, recs...)
	o.heal = len(notes) > 0 || len(m.healed) > 0 || legacy
	notes = append(notes, m.healed...)
	if legacy {
		notes = append(notes, filepath.Base(path)+" is in the older JSON-lines format: rewritten as checksummed frames in two copies")
	}
	for i, p := range bothCopies(path) {
		if st.logs[i], err = fsys.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			st.close()
			return nil, o, rec, fmt.Errorf("controller: metadata log: %w", err)
		}
	}
	st.size = int64(m.end)
	if m.torn > 0 {
		for i, p := range bothCopies(path) {
			if err := st.logs[i].Truncate(st.size); err != nil {
				st.close()
				return nil, o, rec, fmt.Errorf("controller: cutting the torn tail of %s: %w", p, err)
			}
		}
		rec.TruncatedBytes = int64(m.torn)
		notes = append(notes, fmt.Sprintf("%s ended in a torn batch at offset %d (%d bytes), cut", filepath.Base(path), m.end, m.torn))
	}
	for i := range st.logs {
		if err := st.logs[i].Sync(); err != nil {
			st.close()
			return nil, o, rec, fmt.Errorf("controller: metadata log fsync: %w", err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		st.close()
		return nil, o, rec, fmt.Errorf("controller: metadata dir fsync: %w", err)
	}
	if st.gen > 0 {
		if fi, err := fsys.Stat(snapName(dir, st.gen)); err == nil {
			st.snapSize = fi.Size()
		}
	}
	// Generations before the previous one (a compaction that crashed before removing
	// them) are not needed; the previous one is the fallback of this one's snapshot.
	for _, g := range append(snaps, logs...) {
		if g < st.gen-1 {
			st.removeGeneration(g)
		}
	}
	rec.Generation = st.gen
	rec.Records = len(o.recs)
	rec.Reason = strings.Join(notes, "; ")
	return st, o, rec, nil
}

// loadBase returns the records of generation g's snapshot (none for g = 0). A snapshot
// damaged or cut in both copies is rebuilt from generation g-1: its snapshot and its whole
// log, which is what generation g's snapshot was written from.
func (s *store) loadBase(g int) ([]record, []string, error) {
	if g == 0 {
		return nil, nil, nil
	}
	path := snapName(s.dir, g)
	recs, m, _, err := readCopies(s.fs, path)
	if err == nil && m.torn == 0 {
		return recs, m.healed, nil
	}
	if err == nil {
		err = fmt.Errorf("metadata snapshot %s ends in %d bytes that are not a whole record at offset %d", path, m.torn, m.end)
	}
	prevLog := logName(s.dir, g-1)
	if _, serr := s.fs.Stat(prevLog); serr != nil {
		return nil, nil, fmt.Errorf("controller: %w; no previous generation to rebuild it from (%s: %v)", err, filepath.Base(prevLog), serr)
	}
	var prev []record
	var perr error
	if g-1 > 0 {
		var pm merged
		prev, pm, _, perr = readCopies(s.fs, snapName(s.dir, g-1))
		if perr == nil && pm.torn > 0 {
			perr = fmt.Errorf("metadata snapshot %s is cut at offset %d", snapName(s.dir, g-1), pm.end)
		}
	}
	var logRecs []record
	if perr == nil {
		logRecs, _, _, perr = readCopies(s.fs, prevLog)
	}
	if perr != nil {
		return nil, nil, fmt.Errorf("controller: %w; rebuilding it from generation %d failed too: %v", err, g-1, perr)
	}
	return append(prev, logRecs...), []string{fmt.Sprintf("%v: rebuilt from generation %d (its snapshot and log)", err, g-1)}, nil
}

// append writes data (a framed batch) at the end of both copies and fsyncs both. On error
// the copies are cut back to their last whole frame where possible.
func (s *store) append(data []byte) error {
	path := logName(s.dir, s.gen)
	for i, p := range bothCopies(path) {
		if _, err := s.logs[i].WriteAt(data, s.size); err != nil {
			s.cutBack()
			return namedErr("write", p, err)
		}
	}
	for i, p := range bothCopies(path) {
		if err := s.logs[i].Sync(); err != nil {
			s.cutBack()
			return namedErr("fsync", p, err)
		}
	}
	s.size += int64(len(data))
	return nil
}

// namedErr is err of op on path, naming the path once (an *os.PathError names it already).
func namedErr(op, path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// cutBack drops a failed append's bytes from both copies (best effort: the next append
// starts a new generation anyway).
func (s *store) cutBack() {
	for _, f := range s.logs {
		_ = f.Truncate(s.size)
	}
}

// needsCompaction reports whether the log has outgrown its bound.
func (s *store) needsCompaction() bool { return s.size > max(compactMinBytes, 4*s.snapSize) }

// compact starts generation gen+1 with a snapshot of the whole state (both copies), an
// empty log (both copies), and removes generation gen-1.
func (s *store) compact(state []record) error {
	data, err := encodeSnapshot(state)
	if err != nil {
		return err
	}
	next := s.gen + 1
	for _, p := range bothCopies(snapName(s.dir, next)) {
		if err := vfs.WriteFileAtomic(s.fs, p, data); err != nil {
			return fmt.Errorf("compaction snapshot %s: %w", p, err)
		}
	}
	var logs [2]vfs.File
	closeAll := func() {
		for _, f := range logs {
			if f != nil {
				f.Close()
			}
		}
	}
	for i, p := range bothCopies(logName(s.dir, next)) {
		f, err := s.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			closeAll()
			return fmt.Errorf("compaction log %s: %w", p, err)
		}
		logs[i] = f
		if err := f.Sync(); err != nil {
			closeAll()
			return fmt.Errorf("compaction log %s fsync: %w", p, err)
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		closeAll()
		return fmt.Errorf("compaction dir fsync: %w", err)
	}
	s.close()
	s.logs, s.gen, s.size, s.snapSize = logs, next, 0, int64(len(data))
	if s.gen >= 2 {
		s.removeGeneration(s.gen - 2)
	}
	return nil
}

// removeGeneration removes both copies of generation g's snapshot and log (best effort).
func (s *store) removeGeneration(g int) {
	for _, path := range []string{snapName(s.dir, g), logName(s.dir, g)} {
		for _, p := range bothCopies(path) {
			_ = s.fs.Remove(p)
		}
	}
}

func (s *store) close() {
	for i, f := range s.logs {
		if f != nil {
			f.Close()
			s.logs[i] = nil
		}
	}
}
