package controller

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Topic ids (KIP-516). Every topic incarnation has a 16-byte id, generated when the topic is
// created and kept in its topic record of the metadata log, so it survives controller
// restarts. A topic deleted and created again under the same name gets a new id.
//
// New ids are random version-4 UUIDs, as Kafka's Uuid.randomUuid: never the zero id
// (Kafka's ZERO_UUID, "no id"), never Kafka's reserved METADATA_TOPIC_ID (0...01), and never
// one whose string form starts with '-' (it would read as a command-line flag).
//
// A topic record written before ids were random holds none: the topic then gets an id
// derived from its name and creation number (a version-8 UUID from SHA-256), the same on
// every replay, so it is stable across restarts until a snapshot records it. Replicas
// created then wrote the creation number itself as their id (legacyTopicID) in
// partition.metadata; the brokers accept that form for the topic it numbers (see
// LegacyTopicID).

// metadataTopicID is Kafka's Uuid.METADATA_TOPIC_ID (the id of __cluster_metadata), reserved.
var metadataTopicID = TopicID{15: 1}

// usableTopicID reports whether id may name a topic (see the rules above).
func usableTopicID(id TopicID) bool {
	return id != (TopicID{}) && id != metadataTopicID && !strings.HasPrefix(id.String(), "-")
}

// randomTopicID reads a usable version-4 UUID from r (crypto/rand.Reader when nil).
func randomTopicID(r io.Reader) (TopicID, error) {
	if r == nil {
		r = rand.Reader
	}
	for {
		var id TopicID
		if _, err := io.ReadFull(r, id[:]); err != nil {
			return TopicID{}, fmt.Errorf("generating a topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if usableTopicID(id) {
			return id, nil
		}
	}
}

// derivedTopicID is the id of a topic recorded without one: a version-8 UUID from
// SHA-256(name, seq), the first usable one of an attempt counter.
func derivedTopicID(name string, seq int64) TopicID {
	for attempt := uint32(0); ; attempt++ {
		h := sha256.New()
		h.Write([]byte("isrbench topic id\x00"))
		h.Write([]byte(name))
		var n [12]byte
		binary.BigEndian.PutUint64(n[:8], uint64(seq))
		binary.BigEndian.PutUint32(n[8:], attempt)
		h.Write(n[:])
		var id TopicID
		copy(id[:], h.Sum(nil))
		id[6] = id[6]&0x0f | 0x80 // version 8 (custom)
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if usableTopicID(id) {
			return id
		}
	}
}

// legacyTopicID is the id replicas of topic creation number seq were given before ids were
// random: seq big-endian in the last 8 bytes (zero for seq 0).
func legacyTopicID(seq int64) TopicID {
	var id TopicID
	if seq > 0 {
		binary.BigEndian.PutUint64(id[8:], uint64(seq))
	}
	return id
}

// newTopicIDLocked returns a random topic id that no current topic has (mu held).
func (c *Controller) newTopicIDLocked() (TopicID, error) {
	for {
		id, err := randomTopicID(c.cfg.TopicIDSource)
		if err != nil {
			return TopicID{}, err
		}
		if _, taken := c.topicByIDLocked(id); !taken {
			return id, nil
		}
	}
}

func (c *Controller) topicByIDLocked(id TopicID) (string, bool) {
	for name, t := range c.mu.topics {
		if t.id == id {
			return name, true
		}
	}
	return "", false
}

// TopicName returns the name of the topic whose current incarnation has id; ok is false if
// no topic has it (Kafka's UNKNOWN_TOPIC_ID). O(topics): for admin requests by id.
func (c *Controller) TopicName(id TopicID) (name string, ok bool) {
	if id == (TopicID{}) {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topicByIDLocked(id)
}

// TopicIDs returns the id of every topic, by name.
func (c *Controller) TopicIDs() map[string]TopicID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]TopicID, len(c.mu.topics))
	for name, t := range c.mu.topics {
		out[name] = t.id
	}
	return out
}

// LegacyTopicID returns the id the topic's replicas were given before topic ids were random
// (its creation number; zero for a topic recorded before topics were numbered): a replica
// whose partition.metadata holds it belongs to the topic's current incarnation, since
// creation numbers are never reused. ok is false if the topic does not exist.
func (c *Controller) LegacyTopicID(topic string) (TopicID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.topics[topic]
	if !ok {
		return TopicID{}, false
	}
	return legacyTopicID(t.seq), true
}

// recordedTopicID is the id of the topic a topic record describes: its TopicID, or for a
// record without one derivedTopicID.
func recordedTopicID(t *topicRecord) (TopicID, error) {
	if t.TopicID == "" {
		return derivedTopicID(t.Name, t.ID), nil
	}
	id, ok := ParseTopicID(t.TopicID)
	if !ok || !usableTopicID(id) {
		return TopicID{}, fmt.Errorf("topic %q: bad topic id %q", t.Name, t.TopicID)
	}
	return id, nil
}

// TopicIDIndex maps the current topics' ids to their names and back: a snapshot, never
// changed once published (do not modify it).
type TopicIDIndex struct {
	ByID   map[TopicID]string
	ByName map[string]TopicID
}

// TopicIDIndex returns the index of the topics as of the last completed operation.
// Lock-free: the wire server resolves Fetch v13+ topic ids with it on every request.
func (c *Controller) TopicIDIndex() *TopicIDIndex { return c.topicIDs.Load() }

// maybePublishTopicIDsLocked publishes the index anew if an operation changed topics (mu
// held; at the end of every flush, after a rollback too).
func (c *Controller) maybePublishTopicIDsLocked() {
	if c.mu.topicsChanged {
		c.publishTopicIDsLocked()
		c.mu.topicsChanged = false
	}
}

func (c *Controller) publishTopicIDsLocked() {
	ix := &TopicIDIndex{ByID: make(map[TopicID]string, len(c.mu.topics)), ByName: make(map[string]TopicID, len(c.mu.topics))}
	for name, t := range c.mu.topics {
		ix.ByID[t.id] = name
		ix.ByName[name] = t.id
	}
	c.topicIDs.Store(ix)
}
