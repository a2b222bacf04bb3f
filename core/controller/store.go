package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// The metadata log: what KRaft's __cluster_metadata log is to Kafka. Every controller
// operation appends the records of what it changed and fsyncs them before any broker hears
// of the change. Files in Config.Dir, for generation G:
//
//	metadata-G.snapshot   the whole state when generation G began (absent for G = 0)
//	metadata-G.log        records appended since, one JSON object per line
//
// A record holds the whole new value of one thing (a broker registration, a topic, a
// partition state, a partition's damaged replicas, a topic deletion, the dynamic configs of
// one broker-config resource), so replaying a log
// over its snapshot in order gives the state. When the log grows past
// max(compactMinBytes, 4 x the snapshot) the controller writes generation G+1's snapshot
// (temp file, fsync, rename, fsync dir), starts an empty log and removes generation G.
// Open loads the newest generation that has a snapshot; a torn last line (a crash during
// an append) is cut and reported, anything else unreadable is an error.

const compactMinBytes = 1 << 20

// record is one line of the metadata log.
type record struct {
	Type         string              `json:"type"` // broker | topic | partition | damaged | delete-topic | broker-config
	Broker       *brokerRecord       `json:"broker,omitempty"`
	BrokerConfig *brokerConfigRecord `json:"broker_config,omitempty"`
	Topic        *topicRecord        `json:"topic,omitempty"`
	Partition    *PartitionState     `json:"partition,omitempty"`
	Damaged      *damagedRecord      `json:"damaged,omitempty"`
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
	ID         int64             `json:"id,omitempty"`
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
	// Reason says what was repaired ("" if nothing).
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
	log      vfs.File
	size     int64 // bytes in the log
	snapSize int64
	loaded   []record // snapshot + log at open; released after load
}

func snapName(dir string, g int) string {
	return filepath.Join(dir, "metadata-"+strconv.Itoa(g)+".snapshot")
}
func logName(dir string, g int) string { return filepath.Join(dir, "metadata-"+strconv.Itoa(g)+".log") }

// generations lists the generations with a snapshot or a log in dir, ascending.
func generations(fsys vfs.FS, dir string) (snaps, logs []int, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, "metadata-")
		if !ok {
			continue
		}
		for ext, into := range map[string]*[]int{".snapshot": &snaps, ".log": &logs} {
			if num, ok := strings.CutSuffix(rest, ext); ok {
				if g, err := strconv.Atoi(num); err == nil && g >= 0 {
					*into = append(*into, g)
				}
			}
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	return snaps, logs, nil
}

func openStore(fsys vfs.FS, dir string) (*store, Recovery, error) {
	rec := Recovery{Dir: dir}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, rec, fmt.Errorf("controller: metadata dir %s: %w", dir, err)
	}
	snaps, logs, err := generations(fsys, dir)
	if err != nil {
		return nil, rec, fmt.Errorf("controller: metadata dir %s: %w", dir, err)
	}
	st := &store{fs: fsys, dir: dir}
	if len(snaps) > 0 {
		st.gen = snaps[len(snaps)-1]
	}
	if st.gen > 0 {
		data, err := vfs.ReadFile(fsys, snapName(dir, st.gen))
		if err != nil {
			return nil, rec, fmt.Errorf("controller: metadata snapshot: %w", err)
		}
		recs, torn, err := parseRecords(data, snapName(dir, st.gen))
		if err != nil || torn > 0 {
			return nil, rec, fmt.Errorf("controller: metadata snapshot %s is damaged (%d torn bytes): %v", snapName(dir, st.gen), torn, err)
		}
		st.loaded = recs
		st.snapSize = int64(len(data))
	}
	path := logName(dir, st.gen)
	data, err := vfs.ReadFile(fsys, path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, rec, fmt.Errorf("controller: metadata log: %w", err)
	}
	recs, torn, err := parseRecords(data, path)
	if err != nil {
		return nil, rec, err
	}
	st.loaded = append(st.loaded, recs...)
	if st.log, err = fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, rec, fmt.Errorf("controller: metadata log: %w", err)
	}
	st.size = int64(len(data)) - torn
	if torn > 0 {
		if err := st.log.Truncate(st.size); err != nil {
			st.log.Close()
			return nil, rec, fmt.Errorf("controller: cutting the torn tail of %s: %w", path, err)
		}
		rec.TruncatedBytes = torn
		rec.Reason = fmt.Sprintf("%s ended in a torn record (%d bytes), cut", filepath.Base(path), torn)
	}
	if err := st.log.Sync(); err != nil {
		st.log.Close()
		return nil, rec, fmt.Errorf("controller: metadata log fsync: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		st.log.Close()
		return nil, rec, fmt.Errorf("controller: metadata dir fsync: %w", err)
	}
	// Older generations (a compaction that crashed before removing them) are not needed.
	for _, g := range append(snaps, logs...) {
		if g < st.gen {
			_ = fsys.Remove(snapName(dir, g))
			_ = fsys.Remove(logName(dir, g))
		}
	}
	rec.Generation = st.gen
	rec.Records = len(st.loaded)
	return st, rec, nil
}

// parseRecords decodes JSON lines. A last line without its newline that does not decode is a
// torn append: its length is returned as torn. Any other bad line is an error naming it.
func parseRecords(data []byte, name string) (recs []record, torn int64, err error) {
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			var r record
			if json.Unmarshal(data, &r) != nil || r.Type == "" {
				return recs, int64(len(data)), nil
			}
			return recs, int64(len(data)), nil // complete JSON but no newline: still torn (not fsynced as a whole)
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

func encodeRecords(recs []record) ([]byte, error) {
	var buf bytes.Buffer
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// append writes recs and fsyncs; it compacts when the log has grown enough, taking the
// whole state from snapshot.
func (s *store) append(recs []record, snapshot func() []record) error {
	data, err := encodeRecords(recs)
	if err != nil {
		return err
	}
	if _, err := s.log.WriteAt(data, s.size); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	s.size += int64(len(data))
	if s.size > max(compactMinBytes, 4*s.snapSize) {
		return s.compact(snapshot())
	}
	return nil
}

// compact starts generation gen+1 with a snapshot of the whole state.
func (s *store) compact(state []record) error {
	data, err := encodeRecords(state)
	if err != nil {
		return err
	}
	next := s.gen + 1
	if err := vfs.WriteFileAtomic(s.fs, snapName(s.dir, next), data); err != nil {
		return fmt.Errorf("compaction snapshot: %w", err)
	}
	f, err := s.fs.OpenFile(logName(s.dir, next), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("compaction log: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("compaction log fsync: %w", err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("compaction dir fsync: %w", err)
	}
	old := s.gen
	s.log.Close()
	s.log, s.gen, s.size, s.snapSize = f, next, 0, int64(len(data))
	_ = s.fs.Remove(logName(s.dir, old))
	if old > 0 {
		_ = s.fs.Remove(snapName(s.dir, old))
	}
	return nil
}

func (s *store) close() {
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
}

// Records of changes (mu held): appended to the operation's batch.

func (c *Controller) recordBrokerLocked(b *brokerState) {
	c.mu.batch = append(c.mu.batch, record{Type: "broker", Broker: &brokerRecord{ID: b.info.ID, Epoch: b.epoch, Host: b.info.Host, Port: b.info.Port}})
}

func (c *Controller) recordTopicLocked(t *topicState) {
	c.mu.batch = append(c.mu.batch, record{Type: "topic", Topic: &topicRecord{Name: t.name, ID: t.seq, Partitions: int32(len(t.parts)), Configs: t.configs, Created: c.mu.created}})
}

func (c *Controller) recordDeleteTopicLocked(name string) {
	c.mu.batch = append(c.mu.batch, record{Type: "delete-topic", Topic: &topicRecord{Name: name, Created: c.mu.created}})
}

func (c *Controller) recordBrokerConfigLocked(resource string) {
	c.mu.batch = append(c.mu.batch, record{Type: "broker-config", BrokerConfig: &brokerConfigRecord{Resource: resource, Configs: maps.Clone(c.mu.brokerConfigs[resource])}})
}

func (c *Controller) recordPartitionLocked(st *PartitionState) {
	cl := st.Clone()
	c.mu.batch = append(c.mu.batch, record{Type: "partition", Partition: &cl})
}

func (c *Controller) recordDamagedLocked(t *topicState, p int32) {
	c.mu.batch = append(c.mu.batch, record{Type: "damaged", Damaged: &damagedRecord{Topic: t.name, Partition: p, Brokers: slices.Clone(t.damaged[p])}})
}

// snapshotRecordsLocked is the whole state as records (mu held).
func (c *Controller) snapshotRecordsLocked() []record {
	var out []record
	ids := make([]int32, 0, len(c.mu.brokers))
	for id := range c.mu.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := c.mu.brokers[id]
		out = append(out, record{Type: "broker", Broker: &brokerRecord{ID: id, Epoch: b.epoch, Host: b.info.Host, Port: b.info.Port}})
	}
	for _, res := range slices.Sorted(maps.Keys(c.mu.brokerConfigs)) {
		out = append(out, record{Type: "broker-config", BrokerConfig: &brokerConfigRecord{Resource: res, Configs: maps.Clone(c.mu.brokerConfigs[res])}})
	}
	if len(c.mu.topics) == 0 && c.mu.created > 0 {
		// Every topic was deleted: keep the creation count, so topic ids are never reused.
		out = append(out, record{Type: "delete-topic", Topic: &topicRecord{Name: "", Created: c.mu.created}})
	}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		out = append(out, record{Type: "topic", Topic: &topicRecord{Name: name, ID: t.seq, Partitions: int32(len(t.parts)), Configs: t.configs, Created: c.mu.created}})
		for i := range t.parts {
			cl := t.parts[i].Clone()
			out = append(out, record{Type: "partition", Partition: &cl})
		}
		for p := int32(0); p < int32(len(t.parts)); p++ {
			if len(t.damaged[p]) > 0 {
				out = append(out, record{Type: "damaged", Damaged: &damagedRecord{Topic: name, Partition: p, Brokers: slices.Clone(t.damaged[p])}})
			}
		}
	}
	return out
}

// loadLocked replays recs into an empty controller, then takes every partition offline
// and every broker as fenced (a restarted controller has heard from no broker yet), keeping
// the ISRs so the first ISR member to register leads again.
func (c *Controller) loadLocked(recs []record, rec *Recovery) error {
	for i, r := range recs {
		if err := c.applyRecordLocked(r); err != nil {
			return fmt.Errorf("controller: metadata record %d (%s): %w", i+1, r.Type, err)
		}
	}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			if st.Topic == "" {
				return fmt.Errorf("controller: metadata: topic %s partition %d has no state", name, i)
			}
			rec.Partitions++
			if st.Leader == NoLeader {
				continue
			}
			next := st.Clone()
			next.Leader = NoLeader
			next.LeaderEpoch++
			next.PartitionEpoch++
			c.storeLocked(st, next)
		}
	}
	rec.Topics = len(c.mu.topics)
	rec.Brokers = len(c.mu.brokers)
	c.mu.store.loaded = nil
	c.flushLocked()
	return nil
}

func (c *Controller) applyRecordLocked(r record) error {
	switch r.Type {
	case "broker":
		b := r.Broker
		if b == nil {
			return errors.New("no broker")
		}
		c.mu.brokers[b.ID] = &brokerState{info: BrokerInfo{ID: b.ID, Host: b.Host, Port: b.Port}, epoch: b.Epoch}
		c.mu.lastBrokerEpoch = max(c.mu.lastBrokerEpoch, b.Epoch)
	case "topic":
		t := r.Topic
		if t == nil || t.Partitions < 1 || t.Partitions > MaxPartitions {
			return errors.New("bad topic")
		}
		ts := c.mu.topics[t.Name]
		if ts == nil {
			ts = &topicState{name: t.Name}
			c.mu.topics[t.Name] = ts
		}
		ts.seq = t.ID
		ts.configs = t.Configs
		if ts.configs == nil {
			ts.configs = map[string]string{}
		}
		for int32(len(ts.parts)) < t.Partitions {
			ts.parts = append(ts.parts, PartitionState{})
		}
		ts.parts = ts.parts[:t.Partitions]
		c.mu.created = max(c.mu.created, t.Created)
	case "partition":
		p := r.Partition
		if p == nil {
			return errors.New("no partition")
		}
		st := c.partLocked(p.Topic, p.Partition)
		if st == nil {
			return fmt.Errorf("partition %s-%d of an unknown topic", p.Topic, p.Partition)
		}
		*st = p.Clone()
	case "damaged":
		d := r.Damaged
		if d == nil {
			return errors.New("no damaged replicas")
		}
		t, ok := c.mu.topics[d.Topic]
		if !ok {
			return errors.New("damaged replicas of an unknown topic")
		}
		if t.damaged == nil {
			t.damaged = map[int32][]int32{}
		}
		if len(d.Brokers) == 0 {
			delete(t.damaged, d.Partition)
		} else {
			t.damaged[d.Partition] = slices.Clone(d.Brokers)
		}
	case "delete-topic":
		if r.Topic == nil {
			return errors.New("no topic")
		}
		delete(c.mu.topics, r.Topic.Name)
		c.mu.created = max(c.mu.created, r.Topic.Created)
	case "broker-config":
		bc := r.BrokerConfig
		if bc == nil {
			return errors.New("no broker config")
		}
		if err := validBrokerConfigResource(bc.Resource); err != nil {
			return err
		}
		if len(bc.Configs) == 0 {
			delete(c.mu.brokerConfigs, bc.Resource)
		} else {
			c.mu.brokerConfigs[bc.Resource] = maps.Clone(bc.Configs)
		}
	default:
		return fmt.Errorf("unknown record type %q", r.Type)
	}
	return nil
}
