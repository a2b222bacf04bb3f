package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
)

// openStoreCtl opens a controller on dir (fs nil: the OS) and closes it at cleanup.
func openStoreCtl(t *testing.T, fs vfs.FS, dir string, clk *fakeClock) (*Controller, Recovery) {
	t.Helper()
	c, rec, err := Open(Config{Dir: dir, FS: fs, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(c.Close)
	return c, rec
}

// metaState is everything the metadata log keeps, in a comparable form.
type metaState struct {
	topics  []string
	configs map[string]string         // "topic key" -> value
	parts   map[string]PartitionState // "topic-p"
	damaged map[string][]int32        // "topic-p"
	brokers map[int32]BrokerInfo      // Alive as the controller says
	epochs  map[int32]int64           // BrokerEpoch (-1 fenced)
}

func stateOf(c *Controller) metaState {
	s := metaState{topics: c.Topics(), configs: map[string]string{}, parts: map[string]PartitionState{},
		damaged: map[string][]int32{}, brokers: map[int32]BrokerInfo{}, epochs: map[int32]int64{}}
	for _, name := range s.topics {
		for k, v := range c.TopicConfig(name) {
			s.configs[name+" "+k] = v
		}
		sts, _ := c.Partitions(name)
		for _, st := range sts {
			k := fmt.Sprintf("%s-%d", name, st.Partition)
			s.parts[k] = st
			if d := c.Damaged(name, st.Partition); len(d) > 0 {
				s.damaged[k] = d
			}
		}
	}
	for _, b := range c.Brokers() {
		s.brokers[b.ID] = b
		s.epochs[b.ID] = c.BrokerEpoch(b.ID)
	}
	return s
}

// reloaded is what a controller opened on s's metadata log must show: every broker known and
// fenced, every partition that had a leader offline one leader epoch (and partition epoch)
// later, ISRs, replicas, configs and damage as they were.
func (s metaState) reloaded() metaState {
	r := metaState{topics: s.topics, configs: s.configs, damaged: s.damaged, parts: map[string]PartitionState{},
		brokers: map[int32]BrokerInfo{}, epochs: map[int32]int64{}}
	for k, st := range s.parts {
		st = st.Clone()
		if st.Leader != NoLeader {
			st.Leader = NoLeader
			st.LeaderEpoch++
			st.PartitionEpoch++
		}
		r.parts[k] = st
	}
	for id, b := range s.brokers {
		b.Alive = false
		r.brokers[id] = b
		r.epochs[id] = -1
	}
	return r
}

func diffState(t *testing.T, what string, got, want metaState) {
	t.Helper()
	if !slices.Equal(got.topics, want.topics) {
		t.Errorf("%s: topics %v, want %v", what, got.topics, want.topics)
	}
	for k, v := range want.configs {
		if got.configs[k] != v {
			t.Errorf("%s: config %s = %q, want %q", what, k, got.configs[k], v)
		}
	}
	if len(got.configs) != len(want.configs) {
		t.Errorf("%s: configs %v, want %v", what, got.configs, want.configs)
	}
	for k, w := range want.parts {
		g, ok := got.parts[k]
		if !ok || g.String() != w.String() {
			t.Errorf("%s: %s is %v, want %v", what, k, g, w)
		}
	}
	if len(got.parts) != len(want.parts) {
		t.Errorf("%s: %d partitions, want %d", what, len(got.parts), len(want.parts))
	}
	for k, w := range want.damaged {
		if !slices.Equal(got.damaged[k], w) {
			t.Errorf("%s: %s damaged %v, want %v", what, k, got.damaged[k], w)
		}
	}
	if len(got.damaged) != len(want.damaged) {
		t.Errorf("%s: damaged %v, want %v", what, got.damaged, want.damaged)
	}
	for id, w := range want.brokers {
		if g := got.brokers[id]; g != w || got.epochs[id] != want.epochs[id] {
			t.Errorf("%s: broker %+v epoch %d, want %+v epoch %d", what, g, got.epochs[id], w, want.epochs[id])
		}
	}
	if len(got.brokers) != len(want.brokers) {
		t.Errorf("%s: brokers %v, want %v", what, got.brokers, want.brokers)
	}
}

// buildState registers brokers 1..3 and makes a history worth reloading: two topics with
// configs (one altered later), a leader moved, ISRs shrunk, a re-registration with a damaged
// replica, a broker fenced and a partition offline. It returns the highest broker epoch
// given. At the end orders-0, orders-1 and audit.log-0 are led by broker 2 with ISR [2] and
// orders-2 is offline with ISR [1].
func buildState(t *testing.T, c *Controller) int64 {
	t.Helper()
	var top int64
	for id := int32(1); id <= 3; id++ {
		top = mustRegister(t, c, Registration{ID: id, Host: "10.0.0." + fmt.Sprint(id), Port: 9090 + id})
	}
	mustCreate(t, c, "orders", 3, 3, map[string]string{ConfigMinInsyncReplicas: "2", ConfigRetentionMs: "60000"})
	mustCreate(t, c, "audit.log", 1, 2, map[string]string{ConfigUncleanLeaderElectionEnable: "true"})
	if err := c.AlterTopicConfig("orders", map[string]string{ConfigRetentionBytes: "1048576"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TransferLeader("orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	st := mustPart(t, c, "orders", 1)
	if _, err := alterISR(c, "orders", 1, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader}); err != nil {
		t.Fatal(err)
	}
	top = mustRegister(t, c, Registration{ID: 3, Host: "10.0.0.3", Port: 19093, Damaged: []TopicPartition{{Topic: "orders", Partition: 1}}})
	st = mustPart(t, c, "orders", 2) // led by 1 since broker 3's old incarnation was fenced
	if _, err := alterISR(c, "orders", 2, st.Leader, st.LeaderEpoch, st.PartitionEpoch, []int32{st.Leader}); err != nil {
		t.Fatal(err)
	}
	c.BrokerDown(1)
	if st := mustPart(t, c, "orders", 2); st.Leader != NoLeader || !slices.Equal(st.ISR, []int32{1}) {
		t.Fatalf("orders-2 %v, want offline with ISR [1]", st)
	}
	return top
}

// TestMetadataSurvivesReopen: topics, partition counts, configs, replica assignments, ISRs,
// leader and partition epochs, damaged replicas and broker registrations survive closing
// and reopening the metadata log; the reloaded controller fences every broker and takes
// every partition offline with its ISR kept, and the next registration gets a broker epoch
// above every epoch given before.
func TestMetadataSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "metadata")
	clk := &fakeClock{}
	c, rec := openStoreCtl(t, nil, dir, clk)
	if rec.Records != 0 || rec.Topics != 0 || rec.Dir != dir {
		t.Fatalf("fresh directory: %+v", rec)
	}
	top := buildState(t, c)
	before := stateOf(c)
	c.Close()

	c2, rec := openStoreCtl(t, nil, dir, clk)
	if rec.Topics != 2 || rec.Partitions != 4 || rec.Brokers != 3 || rec.Records == 0 || rec.TruncatedBytes != 0 || rec.Reason != "" || rec.Generation != 0 {
		t.Errorf("Recovery %+v", rec)
	}
	if s := rec.String(); !strings.Contains(s, "2 topics, 4 partitions, 3 brokers") || !strings.Contains(s, dir) {
		t.Errorf("Recovery.String() = %q", s)
	}
	diffState(t, "reopened", stateOf(c2), before.reloaded())
	if s := c2.Stats(); s.FencedBrokers != 3 || s.ActiveBrokers != 0 || s.OfflinePartitions != 4 {
		t.Errorf("stats after reload %+v", s)
	}

	// Broker 2 registers first: it leads every partition whose ISR holds it, alone; orders-2
	// (ISR [1]) stays offline.
	e := mustRegister(t, c2, Registration{ID: 2, Host: "10.0.0.2", Port: 9092})
	if e <= top {
		t.Fatalf("first registration after reload: epoch %d, not above %d given before", e, top)
	}
	for k, was := range before.parts {
		now := stateOf(c2).parts[k]
		if slices.Contains(was.ISR, 2) {
			if now.Leader != 2 || !slices.Equal(now.ISR, []int32{2}) || now.LeaderEpoch != was.LeaderEpoch+2 {
				t.Errorf("%s: %v after broker 2 registered (was %v)", k, now, was)
			}
		} else if now.Leader != NoLeader {
			t.Errorf("%s: %v elected without an ISR member (was %v)", k, now, was)
		}
	}
	// Epochs keep increasing.
	if e3 := mustRegister(t, c2, Registration{ID: 3, Host: "10.0.0.3", Port: 19093}); e3 <= e {
		t.Fatalf("epoch %d after %d", e3, e)
	}
	after := stateOf(c2)
	c2.Close()

	// A third open sees what happened after the reload.
	c3, _ := openStoreCtl(t, nil, dir, clk)
	diffState(t, "reopened twice", stateOf(c3), after.reloaded())
	if e := mustRegister(t, c3, Registration{ID: 1, Host: "10.0.0.1", Port: 9091}); e <= after.epochs[3] {
		t.Fatalf("epoch %d after a second reload, not above %d", e, after.epochs[3])
	}
}

// TestMetadataOfflineISRElection: after a reload every partition is offline with its whole
// ISR; the first ISR member to register leads again (clean), a damaged one does not and
// leaves the ISR to the healthy members.
func TestMetadataOfflineISRElection(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	mustCreate(t, c, "t", 1, 3, nil) // [1 2 3], leader 1, ISR [1 2 3]
	c.Close()
	c2, _ := openStoreCtl(t, nil, dir, clk)
	wantState(t, c2, "reloaded", "t", 0, NoLeader, []int32{1, 2, 3}, 1, 1)
	c2.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091, Damaged: []TopicPartition{{Topic: "t", Partition: 0}}})
	wantState(t, c2, "damaged broker 1 registered", "t", 0, NoLeader, []int32{2, 3}, 1, 2)
	c2.RegisterBroker(Registration{ID: 3, Host: "127.0.0.1", Port: 9093})
	wantState(t, c2, "broker 3 registered", "t", 0, 3, []int32{3}, 2, 3)
	c2.RegisterBroker(Registration{ID: 2, Host: "127.0.0.1", Port: 9092})
	wantState(t, c2, "broker 2 registered", "t", 0, 3, []int32{3}, 2, 3)
}

// logPath is generation g's metadata log in dir.
func logPath(dir string, g int) string { return filepath.Join(dir, fmt.Sprintf("metadata-%d.log", g)) }

// TestMetadataTornTail: a last record without its newline (an append cut by a crash, even if
// its JSON happens to be complete) is cut and reported; the records before it are loaded.
func TestMetadataTornTail(t *testing.T) {
	for _, tail := range []string{
		`{"type":"topic","topic":{"name":"ghost","parti`,
		`{"type":"topic","topic":{"name":"ghost","partitions":1,"created":9}}`,
	} {
		t.Run(fmt.Sprint(len(tail)), func(t *testing.T) {
			dir := t.TempDir()
			clk := &fakeClock{}
			c, _ := openStoreCtl(t, nil, dir, clk)
			buildState(t, c)
			before := stateOf(c)
			c.Close()
			good, err := os.ReadFile(logPath(dir, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(logPath(dir, 0), append(slices.Clone(good), tail...), 0o644); err != nil {
				t.Fatal(err)
			}
			c2, rec := openStoreCtl(t, nil, dir, clk)
			if rec.TruncatedBytes != int64(len(tail)) || !strings.Contains(rec.Reason, "torn") || !strings.Contains(rec.Reason, "metadata-0.log") {
				t.Errorf("Recovery %+v: want a torn tail of %d bytes reported", rec, len(tail))
			}
			if s := rec.String(); !strings.Contains(s, fmt.Sprintf("cut a torn tail of %d bytes", len(tail))) {
				t.Errorf("Recovery.String() = %q", s)
			}
			diffState(t, "after the torn tail", stateOf(c2), before.reloaded())
			if got, _ := os.ReadFile(logPath(dir, 0)); !bytes.HasPrefix(got, good) || bytes.Contains(got, []byte("ghost")) {
				t.Errorf("the torn tail was not cut from the file (%d bytes, %d before the tail)", len(got), len(good))
			}
			// The log goes on after the cut: a new topic survives the next reopen, parseable.
			c2.RegisterBroker(Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
			mustCreate(t, c2, "after", 1, 1, nil)
			c2.Close()
			c3, rec := openStoreCtl(t, nil, dir, clk)
			if rec.TruncatedBytes != 0 || !slices.Contains(c3.Topics(), "after") || slices.Contains(c3.Topics(), "ghost") {
				t.Errorf("after appending past the cut: %+v, topics %v", rec, c3.Topics())
			}
		})
	}
}

// readBatches returns the raw batches (frame payloads) of a metadata file's first copy.
func readBatches(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mergeCopies(fileCopy{name: path, data: data}, fileCopy{name: path + mirrorExt, missing: true})
	if err != nil || m.torn > 0 {
		t.Fatalf("%s: %v (torn %d)", path, err, m.torn)
	}
	return m.payloads
}

// readFrames returns the JSON records of a metadata file's first copy, one string each.
func readFrames(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, p := range readBatches(t, path) {
		var batch []json.RawMessage
		if err := json.Unmarshal(p, &batch); err != nil {
			t.Fatal(err)
		}
		for _, r := range batch {
			out = append(out, string(r))
		}
	}
	return out
}

// writeFrames writes recs as the frames of both copies of a metadata file, one batch each.
func writeFrames(t *testing.T, path string, recs []string) []byte {
	t.Helper()
	var data []byte
	for _, r := range recs {
		data = appendFrame(data, []byte("["+r+"]"))
	}
	for _, p := range bothCopies(path) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// TestMetadataCorruptRecord: a record damaged in both copies before the tail, a record the
// controller cannot apply and a topic without its partitions are errors naming the file (and
// offset or record) and leave the files as they were.
func TestMetadataCorruptRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(recs []string) []string
		msg  []string
	}{
		{"record without a type", func(l []string) []string { l[1] = `{"broker":{"id":1}}`; return l }, []string{"metadata-0.log batch 2 is not a batch of metadata records", "no type"}},
		{"not JSON", func(l []string) []string { l[2] = `#@!`; return l }, []string{"batch 3 is not a batch of metadata records", "damaged"}},
		{"unknown record type", func(l []string) []string { l[1] = `{"type":"quota"}`; return l }, []string{"metadata record 2", `unknown record type "quota"`}},
		{"partition of an unknown topic", func(l []string) []string {
			return append(l[:len(l)-1:len(l)-1], `{"type":"partition","partition":{"Topic":"nope","Partition":0,"Leader":1,"Replicas":[1],"ISR":[1]}}`, l[len(l)-1])
		}, []string{"partition nope-0 of an unknown topic"}},
		{"topic with zero partitions", func(l []string) []string {
			return append([]string{`{"type":"topic","topic":{"name":"x","partitions":0}}`}, l...)
		}, []string{"metadata record 1 (topic): bad topic"}},
		{"topic whose partition has no state", func(l []string) []string {
			return append(l, `{"type":"topic","topic":{"name":"empty","partitions":1}}`)
		}, []string{"topic empty partition 0 has no state"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &fakeClock{}
			c, _ := openStoreCtl(t, nil, dir, clk)
			buildState(t, c)
			c.Close()
			bad := writeFrames(t, logPath(dir, 0), tc.edit(readFrames(t, logPath(dir, 0))))
			c2, _, err := Open(Config{Dir: dir, Now: clk.Now, Logf: t.Logf})
			if err == nil {
				c2.Close()
				t.Fatal("Open of a damaged metadata log succeeded")
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if got, _ := os.ReadFile(logPath(dir, 0)); !bytes.Equal(got, bad) {
				t.Error("a failed Open changed the metadata log")
			}
		})
	}
}

// flipByte flips one bit of path's byte at off.
func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x08
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// frameOffset is the byte offset of frame k (0-based) of a metadata file.
func frameOffset(t *testing.T, path string, k int) int {
	t.Helper()
	off := 0
	for i, r := range readBatches(t, path) {
		if i == k {
			return off
		}
		off += frameHeader + len(r)
	}
	t.Fatalf("%s has no frame %d", path, k)
	return 0
}

// TestMetadataBitFlipHealed: one flipped bit in a record, in either copy, even one that
// would still parse (an ISR [1] made [3]), is caught by the record's checksum and the
// record is read from the other copy: every change comes back, the damage is reported with
// the file and offset, and both copies are whole again (a new generation).
func TestMetadataBitFlipHealed(t *testing.T) {
	for _, which := range []string{"log", "mirror"} {
		for _, where := range []string{"payload", "length", "checksum"} {
			t.Run(which+" "+where, func(t *testing.T) {
				dir := t.TempDir()
				clk := &fakeClock{}
				c, _ := openStoreCtl(t, nil, dir, clk)
				buildState(t, c)
				want := stateOf(c).reloaded()
				c.Close()
				path := logPath(dir, 0)
				recs := readBatches(t, path)
				k := len(recs) / 2
				off := frameOffset(t, path, k)
				frame := off
				switch where {
				case "payload":
					off += frameHeader + len(recs[k])/2
				case "length":
					off += 3
				case "checksum":
					off += 5
				}
				if which == "mirror" {
					path += mirrorExt
				}
				flipByte(t, path, off)
				c2, rec := openStoreCtl(t, nil, dir, clk)
				diffState(t, "after a bit flip in the "+which, stateOf(c2), want)
				if !strings.Contains(rec.Reason, fmt.Sprintf("offset %d", frame)) ||
					!strings.Contains(rec.Reason, filepath.Base(path)) || rec.Generation != 1 {
					t.Errorf("Recovery %v: want the damaged copy and offset named, and a new generation", rec)
				}
				c2.Close()
				// Whole again: both copies of the new generation agree, and a reopen heals nothing.
				c3, rec3 := openStoreCtl(t, nil, dir, clk)
				if rec3.Reason != "" || rec3.Generation != 1 {
					t.Errorf("second reopen: %v", rec3)
				}
				diffState(t, "second reopen", stateOf(c3), want)
			})
		}
	}
}

// TestMetadataDamageInBothCopies: the same record damaged in both copies before the tail
// stops Open with the file, the offset and the repair command; the files stay as they were.
func TestMetadataDamageInBothCopies(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	buildState(t, c)
	c.Close()
	path := logPath(dir, 0)
	off := frameOffset(t, path, 4) + frameHeader + 2
	for _, p := range bothCopies(path) {
		flipByte(t, p, off)
	}
	before, _ := os.ReadFile(path)
	_, _, err := Open(Config{Dir: dir, Now: clk.Now, Logf: t.Logf})
	var de *damageError
	if !errors.As(err, &de) || de.Offset != off-frameHeader-2 || de.Batch != 5 || de.File != path {
		t.Fatalf("Open = %v, want a damage error at offset %d record 5 of %s", err, off-frameHeader-2, path)
	}
	for _, m := range []string{"both copies", "isrbench metadata --dir " + dir + " --repair", "checksum"} {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not say %q", err, m)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused Open changed the metadata log")
	}
}

// TestMetadataLegacyFormat: a metadata log in the JSON-lines format of earlier releases is
// read and rewritten at once as checksummed frames in two copies.
func TestMetadataLegacyFormat(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	buildState(t, c)
	want := stateOf(c).reloaded()
	c.Close()
	recs := readFrames(t, logPath(dir, 0))
	if err := os.WriteFile(logPath(dir, 0), []byte(strings.Join(recs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(logPath(dir, 0) + mirrorExt); err != nil {
		t.Fatal(err)
	}
	c2, rec := openStoreCtl(t, nil, dir, clk)
	diffState(t, "from JSON lines", stateOf(c2), want)
	if rec.Generation != 1 || !strings.Contains(rec.Reason, "JSON-lines") {
		t.Errorf("Recovery %v: want the older format reported and a new generation", rec)
	}
	for _, p := range bothCopies(snapName(dir, 1)) {
		if data, err := os.ReadFile(p); err != nil || isLegacy(data) {
			t.Errorf("%s: %v (legacy %v)", p, err, isLegacy(data))
		}
	}
}

// TestMetadataCompaction: when the log outgrows its bound the controller writes the whole
// state as the next generation's snapshot and starts an empty log; the old generation is
// removed, and reopening (also after a power loss) gives the same state. Leftovers of an
// older generation (a compaction cut short) are ignored and removed.
func TestMetadataCompaction(t *testing.T) {
	clk := &fakeClock{}
	fs := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
	const dir = "/meta"
	c, _ := openStoreCtl(t, fs, dir, clk)
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	mustCreate(t, c, "hot", 1, 3, map[string]string{ConfigMinInsyncReplicas: "2"})
	// Many superseded records of one partition, then a large topic that pushes the log past
	// the bound (one metadata batch).
	for i := 0; i < 3000; i++ {
		st := mustPart(t, c, "hot", 0)
		isr := []int32{1, 2}
		if len(st.ISR) == 2 {
			isr = []int32{1, 2, 3}
		}
		if _, err := alterISR(c, "hot", 0, 1, st.LeaderEpoch, st.PartitionEpoch, isr); err != nil {
			t.Fatal(err)
		}
	}
	size := func(name string) int64 {
		fi, err := fs.Stat(filepath.Join(dir, name))
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	before := size("metadata-0.log")
	if before <= 0 || size("metadata-1.snapshot") >= 0 {
		t.Fatalf("before the big topic: log %d bytes, snapshot %d", before, size("metadata-1.snapshot"))
	}
	big, last := int32(0), before
	for size("metadata-1.snapshot") < 0 {
		last = size("metadata-0.log")
		big++
		mustCreate(t, c, fmt.Sprintf("big%d", big), 2000, 3, nil)
		if big > 10 {
			t.Fatalf("no compaction after %d large topics (log %d bytes)", big, size("metadata-0.log"))
		}
	}
	grown := last + 2000*100 // the log before compaction: at least ~100 bytes per partition record
	if s := size("metadata-0.log"); s < grown {
		t.Errorf("generation 0's log (%d bytes) not kept whole after compaction: it is the fallback of generation 1's snapshot", s)
	}
	if s := size("metadata-1.log"); s != 0 {
		t.Errorf("generation 1's log is %d bytes, want an empty log", s)
	}
	snap := size("metadata-1.snapshot")
	if snap <= 0 || snap >= grown {
		t.Errorf("snapshot %d bytes, want less than the %d+ bytes of log it replaces", snap, grown)
	}
	// The 3000 ISR changes are one record in the snapshot.
	data, err := vfs.ReadFile(fs, filepath.Join(dir, "metadata-1.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte(`"Topic":"hot"`)); n != 1 {
		t.Errorf("snapshot holds %d records of hot-0, want 1", n)
	}
	// Changes after the compaction go to the new log.
	st := mustPart(t, c, "hot", 0)
	if _, err := alterISR(c, "hot", 0, 1, st.LeaderEpoch, st.PartitionEpoch, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if s := size("metadata-1.log"); s <= 0 || s > 1000 {
		t.Errorf("generation 1's log is %d bytes after one change", s)
	}
	want := stateOf(c).reloaded()
	crashed := fs.CrashClone() // a power loss right now
	c.Close()

	for name, f := range map[string]*vfs.MemFS{"reopened": fs, "after a power loss": crashed} {
		c2, rec, err := Open(Config{Dir: dir, FS: f, Now: clk.Now, Logf: t.Logf})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rec.Generation != 1 || rec.Topics != 1+int(big) || rec.TruncatedBytes != 0 {
			t.Errorf("%s: Recovery %+v", name, rec)
		}
		diffState(t, name, stateOf(c2), want)
		c2.Close()
	}

	// The next compaction removes generation 0 and keeps 1 as the fallback of 2; a
	// leftover of an older generation (a compaction cut short by a crash) is removed by
	// Open.
	c3, _, err := Open(Config{Dir: dir, FS: fs, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	c3.mu.Lock()
	err = c3.mu.store.compact(c3.mu.durable.records())
	c3.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c3.Close()
	if size("metadata-0.log") >= 0 || size("metadata-0.log.mirror") >= 0 || size("metadata-1.snapshot") < 0 {
		t.Errorf("after the second compaction: gen 0 log %d, gen 1 snapshot %d", size("metadata-0.log"), size("metadata-1.snapshot"))
	}
	stale := filepath.Join(dir, "metadata-0.log")
	if err := writeMem(fs, stale, []byte("left over\n")); err != nil {
		t.Fatal(err)
	}
	c4, rec, err := Open(Config{Dir: dir, FS: fs, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatalf("Open with a leftover generation: %v", err)
	}
	defer c4.Close()
	if rec.Generation != 2 {
		t.Errorf("loaded generation %d, want 2", rec.Generation)
	}
	if _, err := fs.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover %s not removed: %v", stale, err)
	}
	if got := mustPart(t, c4, "hot", 0); !slices.Equal(got.ISR, []int32{1}) {
		t.Errorf("hot-0 %v, want ISR [1] from generation 1's log", got)
	}
}

// TestMetadataSnapshotFallback: a snapshot damaged in both copies is rebuilt from the
// previous generation (its snapshot and whole log), with nothing lost, and reported.
func TestMetadataSnapshotFallback(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	buildState(t, c)
	c.mu.Lock()
	err := c.mu.store.compact(c.mu.durable.records())
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, "after", 2, 2, nil) // in generation 1's log
	want := stateOf(c).reloaded()
	c.Close()
	off := frameOffset(t, snapName(dir, 1), 0) + frameHeader + 1
	for _, p := range bothCopies(snapName(dir, 1)) {
		flipByte(t, p, off)
	}
	c2, rec := openStoreCtl(t, nil, dir, clk)
	diffState(t, "rebuilt from generation 0", stateOf(c2), want)
	if !strings.Contains(rec.Reason, "rebuilt from generation 0") || !strings.Contains(rec.Reason, "metadata-1.snapshot") || rec.Generation != 2 {
		t.Errorf("Recovery %v: want the fallback reported and a new generation", rec)
	}
}

func writeMem(fs vfs.FS, name string, data []byte) error {
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestMetadataRepair: CheckMetadata reports a record damaged in both copies without changing
// anything; RepairMetadata cuts both copies there, lists what the cut loses, and Open starts
// with every record before it.
func TestMetadataRepair(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	for id := int32(1); id <= 3; id++ {
		mustRegister(t, c, Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	mustCreate(t, c, "kept", 1, 3, nil)
	c.Close()
	path := logPath(dir, 0)
	keep := len(readBatches(t, path))
	c, _ = openStoreCtl(t, nil, dir, clk)
	mustRegister(t, c, Registration{ID: 1, Host: "127.0.0.1", Port: 9091})
	mustCreate(t, c, "cut", 2, 1, nil)
	c.Close()
	off := frameOffset(t, path, keep) // the first batch after reopening: the partitions going offline
	for _, p := range bothCopies(path) {
		flipByte(t, p, off+frameHeader+3)
	}
	before, _ := os.ReadFile(path)
	rep, err := CheckMetadata(nil, dir)
	if err != nil || rep.Damage == nil || rep.Damage.Offset != off || rep.Damage.Batch != keep+1 {
		t.Fatalf("CheckMetadata = %+v, %v; want damage at offset %d record %d", rep, err, off, keep+1)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("CheckMetadata changed the log")
	}
	rep, err = RepairMetadata(nil, dir)
	if err != nil || rep.Cut == nil || rep.Cut.Offset != off {
		t.Fatalf("RepairMetadata = %+v, %v", rep, err)
	}
	lost := strings.Join(rep.Lost, "\n")
	for _, want := range []string{"damaged batch at offset", "topic cut (2 partitions)", "partition cut-1"} {
		if !strings.Contains(lost, want) {
			t.Errorf("lost records %q do not name %q", rep.Lost, want)
		}
	}
	c2, rec := openStoreCtl(t, nil, dir, clk)
	if got := c2.Topics(); !slices.Equal(got, []string{"kept"}) || rec.TruncatedBytes != 0 {
		t.Errorf("after the repair: topics %v, %v", got, rec)
	}
	if rep, err := CheckMetadata(nil, dir); err != nil || rep.Damage != nil {
		t.Errorf("CheckMetadata after the repair: %+v, %v", rep, err)
	}
}

// TestMetadataTornCreateTopics: a crash part-way through writing a CreateTopics batch leaves
// its topic record without its partitions; the batch is one frame, so it is cut whole as a
// torn tail and the controller starts without the topic (which nobody was told of).
func TestMetadataTornCreateTopics(t *testing.T) {
	for _, keep := range []int{frameHeader - 3, frameHeader + 40, -7} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			dir := t.TempDir()
			clk := &fakeClock{}
			c, _ := openStoreCtl(t, nil, dir, clk)
			buildState(t, c)
			want := stateOf(c).reloaded()
			path := logPath(dir, 0)
			before, _ := os.ReadFile(path)
			mustCreate(t, c, "many", 50, 2, nil)
			c.Close()
			after, _ := os.ReadFile(path)
			cut := len(before) + keep
			if keep < 0 {
				cut = len(after) + keep
			}
			for _, p := range bothCopies(path) {
				if err := os.Truncate(p, int64(cut)); err != nil {
					t.Fatal(err)
				}
			}
			c2, rec := openStoreCtl(t, nil, dir, clk)
			if slices.Contains(c2.Topics(), "many") || rec.TruncatedBytes != int64(cut-len(before)) ||
				!strings.Contains(rec.Reason, fmt.Sprintf("torn batch at offset %d", len(before))) {
				t.Errorf("topics %v, %v: want the torn CreateTopics batch cut at %d", c2.Topics(), rec, len(before))
			}
			diffState(t, "after the torn batch", stateOf(c2), want)
		})
	}
}

// TestMetadataLastBatchDamaged: the newest batch damaged in both copies by a flipped bit (a
// whole frame, no zero bytes: not what a crash leaves) is not cut as a torn tail, which
// would silently drop a change brokers acted on (an ISR shrink): Open refuses with the file
// and offset. A zero-filled or cut-short last frame is a torn append and is cut.
func TestMetadataLastBatchDamaged(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b []byte, last int) []byte
		torn bool
	}{
		{"bit flip", func(b []byte, last int) []byte { b[len(b)-10] ^= 0x10; return b }, false},
		{"zeros", func(b []byte, last int) []byte { clear(b[last+frameHeader+5 : last+frameHeader+25]); return b }, true},
		{"cut short", func(b []byte, last int) []byte { return b[:len(b)-3] }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &fakeClock{}
			c, _ := openStoreCtl(t, nil, dir, clk)
			buildState(t, c)
			c.Close()
			path := logPath(dir, 0)
			last := frameOffset(t, path, len(readBatches(t, path))-1)
			for _, p := range bothCopies(path) {
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, tc.edit(b, last), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c2, rec, err := Open(Config{Dir: dir, Now: clk.Now, Logf: t.Logf})
			if tc.torn {
				if err != nil || rec.TruncatedBytes == 0 {
					t.Fatalf("Open = %v, %v: want the torn last batch cut", rec, err)
				}
				c2.Close()
				return
			}
			var de *damageError
			if !errors.As(err, &de) || de.Offset != last {
				t.Fatalf("Open = %v: want the damaged last batch at offset %d refused", err, last)
			}
		})
	}
}
