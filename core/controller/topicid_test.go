package controller

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
)

// TestTopicIDs: every topic gets a random version-4 id at creation, distinct from every
// other topic's and from the reserved ids; TopicName resolves it while the topic exists.
func TestTopicIDs(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	seen := map[TopicID]string{}
	for _, name := range []string{"a", "b", "c", "d"} {
		mustCreate(t, c, name, 1, 1, nil)
		id, ok := c.TopicID(name)
		if !ok || !usableTopicID(id) || id[6]>>4 != 4 || id[8]>>6 != 2 {
			t.Fatalf("%s: id %v (%x), want a version-4 UUID", name, id, id[:])
		}
		if other, dup := seen[id]; dup {
			t.Fatalf("%s and %s share id %v", name, other, id)
		}
		seen[id] = name
		if got, ok := c.TopicName(id); !ok || got != name {
			t.Errorf("TopicName(%v) = %q %v, want %q", id, got, ok, name)
		}
	}
	idA, _ := c.TopicID("a")
	if err := c.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if name, ok := c.TopicName(idA); ok {
		t.Errorf("TopicName of a deleted topic's id = %q", name)
	}
	if _, ok := c.TopicName(TopicID{}); ok {
		t.Error("TopicName of the zero id found a topic")
	}
	if ids := c.TopicIDs(); len(ids) != 3 || ids["b"] == (TopicID{}) {
		t.Errorf("TopicIDs() = %v", ids)
	}
}

// TestRandomTopicIDSkipsReserved: an id whose string form starts with '-' is drawn again, as
// Kafka's Uuid.randomUuid does.
func TestRandomTopicIDSkipsReserved(t *testing.T) {
	src := bytes.NewReader(append(bytes.Repeat([]byte{0xf8}, 16), bytes.Repeat([]byte{0x11}, 16)...))
	id, err := randomTopicID(src)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(id.String(), "-") || id[0] != 0x11 {
		t.Errorf("id %v (%x): want the second draw", id, id[:])
	}
	if _, err := randomTopicID(bytes.NewReader(nil)); err == nil {
		t.Error("an exhausted source gave an id")
	}
}

// TestTopicIDsDurable: ids come back from the metadata log and from a snapshot; a topic record
// written before ids were random gets the id derived from its name and creation number, the
// same on every open, and its legacy id is its creation number.
func TestTopicIDsDurable(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	c, _ := openStoreCtl(t, nil, dir, clk)
	c.RegisterBroker(Registration{ID: 1})
	mustCreate(t, c, "kept", 2, 1, nil)
	mustCreate(t, c, "old", 1, 1, nil)
	want, _ := c.TopicID("kept")
	c.Close()

	// Strip the id from old's topic record, as an earlier release wrote it.
	var recs []string
	for _, r := range readFrames(t, logPath(dir, 0)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		if tr, ok := m["topic"].(map[string]any); ok && tr["name"] == "old" {
			delete(tr, "topic_id")
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			r = string(b)
		}
		recs = append(recs, r)
	}
	writeFrames(t, logPath(dir, 0), recs)

	var oldID TopicID
	for i := range 2 {
		c, _ := openStoreCtl(t, nil, dir, clk)
		if got, _ := c.TopicID("kept"); got != want {
			t.Errorf("open %d: kept's id %v, want %v", i, got, want)
		}
		got, _ := c.TopicID("old")
		if got != derivedTopicID("old", 2) {
			t.Errorf("open %d: old's id %v, want the derived %v", i, got, derivedTopicID("old", 2))
		}
		if i == 1 && got != oldID {
			t.Errorf("old's id changed across opens: %v then %v", oldID, got)
		}
		oldID = got
		if legacy, _ := c.LegacyTopicID("old"); legacy != (TopicID{15: 2}) {
			t.Errorf("old's legacy id %x, want its creation number 2", legacy[:])
		}
		c.Close()
	}
	// A snapshot records the derived id.
	c, _ = openStoreCtl(t, nil, dir, clk)
	c.mu.Lock()
	err := c.mu.store.compact(c.mu.durable.records())
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, _ = openStoreCtl(t, nil, dir, clk)
	if got, _ := c.TopicID("old"); got != oldID {
		t.Errorf("from a snapshot: old's id %v, want %v", got, oldID)
	}
	if got, _ := c.TopicID("kept"); got != want {
		t.Errorf("from a snapshot: kept's id %v, want %v", got, want)
	}
}

// TestTopicIDIndex: the lock-free index follows creations and deletions, is loaded with the
// metadata log, and a creation the metadata log refused (rolled back) is not in it.
func TestTopicIDIndex(t *testing.T) {
	clk := &fakeClock{}
	mem := vfs.NewMemFS(func() time.Time { return time.Unix(0, clk.Now()) })
	efs := vfs.NewErrorFS(mem)
	c, _, err := Open(Config{Dir: "/m", FS: efs, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.RegisterBroker(Registration{ID: 1})
	if ix := c.TopicIDIndex(); ix == nil || len(ix.ByID) != 0 {
		t.Fatalf("index of no topics: %+v", ix)
	}
	mustCreate(t, c, "a", 1, 1, nil)
	mustCreate(t, c, "b", 1, 1, nil)
	idA, _ := c.TopicID("a")
	if ix := c.TopicIDIndex(); ix.ByID[idA] != "a" || ix.ByName["a"] != idA || len(ix.ByID) != 2 {
		t.Errorf("index after two creations: %+v", ix)
	}
	if err := c.DeleteTopic("b"); err != nil {
		t.Fatal(err)
	}
	if ix := c.TopicIDIndex(); len(ix.ByID) != 1 || ix.ByName["b"] != (TopicID{}) {
		t.Errorf("index after a deletion: %+v", ix)
	}
	efs.SetInjector(func(o vfs.Op, path string) error {
		if o == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	if _, err := c.CreateTopic("refused", 1, 1, nil); err == nil {
		t.Fatal("a creation the metadata log cannot take succeeded")
	}
	efs.SetInjector(nil)
	if ix := c.TopicIDIndex(); len(ix.ByID) != 1 || ix.ByName["a"] != idA {
		t.Errorf("index after a refused creation: %+v", ix)
	}
	c.Close()
	c2, _, err := Open(Config{Dir: "/m", FS: mem, Now: clk.Now, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if ix := c2.TopicIDIndex(); len(ix.ByID) != 1 || ix.ByID[idA] != "a" {
		t.Errorf("index after a reopen: %+v", ix)
	}
}
