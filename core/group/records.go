package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Key versions of __consumer_offsets records (Kafka's GroupMetadataManager schemas).
const (
	keyVersionOffsetV0 int16 = 0 // OffsetCommitKey v0 (same layout as v1)
	keyVersionOffset   int16 = 1 // OffsetCommitKey v1: group, topic, partition
	keyVersionGroup    int16 = 2 // GroupMetadataKey v2: group

	offsetValueVersion int16 = 3 // OffsetCommitValue v3: offset, leader_epoch, metadata, commit_timestamp
	groupValueVersion  int16 = 3 // GroupMetadataValue v3
)

// TP names one partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

// Committed is one committed offset: the next offset the group consumes from the partition
// (exclusive end of what it has processed), as OffsetCommit carries it.
type Committed struct {
	Offset          int64
	LeaderEpoch     int32  // -1 = unknown
	Metadata        string // client-defined, at most offset.metadata.max.bytes
	CommitTimestamp int64  // ms
	// logOffset is the __consumer_offsets offset of the record that set it (a later
	// record wins, whether it is replayed from the log or applied after a write).
	logOffset int64
	// expireTimestamp is when it expires (ms) if its record says (OffsetCommitValue v1);
	// 0: offsets.retention.minutes decides.
	expireTimestamp int64
}

// StoredMember is one member as recorded in a GroupMetadataValue.
type StoredMember struct {
	MemberID         string
	InstanceID       string // "" = dynamic member
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32 // ms
	SessionTimeout   int32 // ms
	Subscription     []byte
	Assignment       []byte
}

// StoredGroup is a GroupMetadataValue: the group's generation, protocol, leader and members
// with their assignments, written at the end of each rebalance (and when the group becomes
// Empty).
type StoredGroup struct {
	ProtocolType     string
	Generation       int32
	Protocol         string // "" = none (Empty)
	Leader           string // "" = none
	StateTimestampMs int64  // when the group entered its state (ms); -1 = unknown (values before v2)
	Members          []StoredMember
}

// Record is one key/value pair written to (or read from) __consumer_offsets; a nil Value is a
// tombstone.
type Record struct {
	Key, Value []byte
}

// OffsetKey encodes an OffsetCommitKey v1 (group, topic, partition).
func OffsetKey(group string, tp TP) []byte {
	b := kbin.AppendInt16(nil, keyVersionOffset)
	b = kbin.AppendString(b, group)
	b = kbin.AppendString(b, tp.Topic)
	return kbin.AppendInt32(b, tp.Partition)
}

// OffsetValue encodes an OffsetCommitValue v3 (offset, leader epoch, metadata, commit time).
func OffsetValue(c Committed) []byte {
	b := kbin.AppendInt16(nil, offsetValueVersion)
	b = kbin.AppendInt64(b, c.Offset)
	b = kbin.AppendInt32(b, c.LeaderEpoch)
	b = kbin.AppendString(b, c.Metadata)
	return kbin.AppendInt64(b, c.CommitTimestamp)
}

// GroupKey encodes a GroupMetadataKey v2 (group).
func GroupKey(group string) []byte {
	b := kbin.AppendInt16(nil, keyVersionGroup)
	return kbin.AppendString(b, group)
}

// GroupValue encodes a GroupMetadataValue v3.
func GroupValue(g StoredGroup) []byte {
	b := kbin.AppendInt16(nil, groupValueVersion)
	b = kbin.AppendString(b, g.ProtocolType)
	b = kbin.AppendInt32(b, g.Generation)
	b = kbin.AppendNullableString(b, nullable(g.Protocol))
	b = kbin.AppendNullableString(b, nullable(g.Leader))
	b = kbin.AppendInt64(b, g.StateTimestampMs)
	b = kbin.AppendArrayLen(b, len(g.Members))
	for _, m := range g.Members {
		b = kbin.AppendString(b, m.MemberID)
		b = kbin.AppendNullableString(b, nullable(m.InstanceID))
		b = kbin.AppendString(b, m.ClientID)
		b = kbin.AppendString(b, m.ClientHost)
		b = kbin.AppendInt32(b, m.RebalanceTimeout)
		b = kbin.AppendInt32(b, m.SessionTimeout)
		b = kbin.AppendBytes(b, m.Subscription)
		b = kbin.AppendBytes(b, m.Assignment)
	}
	return b
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Decoded is one decoded __consumer_offsets record: exactly one of the offset or group
// forms, and Tombstone when the value was null.
type Decoded struct {
	Group     string
	IsOffset  bool // an offset commit (TP, Offset) rather than group metadata (Stored)
	TP        TP
	Tombstone bool
	Offset    Committed
	Stored    StoredGroup
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("group: __consumer_offsets record: "+format+": %w", append(args, kerr.CorruptMessage)...)
}

// DecodeRecord decodes a __consumer_offsets record key and value (nil value = tombstone).
// Offset values v0..v3 and group values v0..v3 are read; an unknown key or value version, or
// truncated bytes, is an error wrapping kerr.CorruptMessage. It never panics.
func DecodeRecord(key, value []byte) (Decoded, error) {
	var d Decoded
	r := kbin.Reader{Src: key}
	kv := r.Int16()
	switch kv {
	case keyVersionOffsetV0, keyVersionOffset:
		d.IsOffset = true
		d.Group = r.String()
		d.TP.Topic = r.String()
		d.TP.Partition = r.Int32()
	case keyVersionGroup:
		d.Group = r.String()
	default:
		if err := r.Complete(); err != nil {
			return d, corrupt("key truncated")
		}
		return d, corrupt("unknown key version %d (want 0, 1 or 2)", kv)
	}
	if err := r.Complete(); err != nil {
		return d, corrupt("key version %d truncated", kv)
	}
	if len(r.Src) != 0 {
		return d, corrupt("key version %d has %d trailing bytes", kv, len(r.Src))
	}
	if value == nil {
		d.Tombstone = true
		return d, nil
	}
	r = kbin.Reader{Src: value}
	vv := r.Int16()
	if d.IsOffset {
		switch vv {
		case 0, 1, 2, 3:
		default:
			return d, corrupt("offset value version %d unknown (want 0..3)", vv)
		}
		c := &d.Offset
		c.LeaderEpoch = -1
		c.Offset = r.Int64()
		if vv == 3 {
			c.LeaderEpoch = r.Int32()
		}
		c.Metadata = r.String()
		c.CommitTimestamp = r.Int64()
		if vv == 1 {
			if e := r.Int64(); e > 0 { // expire timestamp (v1 only); -1 = none
				c.expireTimestamp = e
			}
		}
	} else {
		if vv < 0 || vv > 3 {
			return d, corrupt("group value version %d unknown (want 0..3)", vv)
		}
		g := &d.Stored
		g.ProtocolType = r.String()
		g.Generation = r.Int32()
		g.Protocol = deref(r.NullableString())
		g.Leader = deref(r.NullableString())
		g.StateTimestampMs = -1 // none before v2
		if vv >= 2 {
			g.StateTimestampMs = r.Int64()
		}
		n := r.ArrayLen()
		if n < 0 {
			return d, corrupt("group value members count %d is negative", n)
		}
		for i := int32(0); i < n && r.Ok(); i++ {
			var m StoredMember
			m.MemberID = r.String()
			if vv >= 3 {
				m.InstanceID = deref(r.NullableString())
			}
			m.ClientID = r.String()
			m.ClientHost = r.String()
			m.RebalanceTimeout = -1
			if vv >= 1 {
				m.RebalanceTimeout = r.Int32()
			}
			m.SessionTimeout = r.Int32()
			m.Subscription = append([]byte(nil), r.Bytes()...)
			m.Assignment = append([]byte(nil), r.Bytes()...)
			g.Members = append(g.Members, m)
		}
	}
	if err := r.Complete(); err != nil {
		return d, corrupt("value version %d truncated", vv)
	}
	return d, nil
}
