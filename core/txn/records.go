package txn

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's status as __transaction_state stores it (Kafka's
// TransactionState ids).
type State int8

// Kafka's transaction states.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is the state's name as kafka-transactions.sh prints it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("Unknown(%d)", int8(s))
}

// TP names one partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

// Meta is one transactional id's state: what a TransactionLogValue holds. A plain value.
type Meta struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
	State           State
	Partitions      []TP  // sorted by topic, partition; the partitions of the transaction
	UpdateMs        int64 // last update (ms)
	StartMs         int64 // when the transaction began (ms), -1 when none
}

func (m *Meta) has(tp TP) bool {
	i := sort.Search(len(m.Partitions), func(i int) bool { return !tpLess(m.Partitions[i], tp) })
	return i < len(m.Partitions) && m.Partitions[i] == tp
}

func tpLess(a, b TP) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// withPartitions returns m's partitions plus tps, sorted, without duplicates.
func (m *Meta) withPartitions(tps []TP) []TP {
	out := append(append([]TP(nil), m.Partitions...), tps...)
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	k := 0
	for i, tp := range out {
		if i == 0 || tp != out[k-1] {
			out[k] = tp
			k++
		}
	}
	return out[:k]
}

// Records of __transaction_state (Kafka's TransactionLog schemas, big endian; string = int16
// length + bytes):
//
//	TransactionLogKey   version int16 = 0 | transactional_id string
//	TransactionLogValue version int16 = 0 | producer_id int64 | producer_epoch int16 |
//	                    transaction_timeout_ms int32 | transaction_status int8 |
//	                    transaction_partitions nullable array (int32 count, -1 = null) of
//	                      { topic string | partition_ids array of int32 } |
//	                    transaction_last_update_timestamp_ms int64 |
//	                    transaction_start_timestamp_ms int64
//
// A null value is a tombstone (the id expired).

// Key encodes the TransactionLogKey of id.
func Key(id string) []byte {
	b := kbin.AppendInt16(nil, 0)
	return kbin.AppendString(b, id)
}

// Value encodes m as a TransactionLogValue v0.
func Value(m Meta) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt64(b, m.ProducerID)
	b = kbin.AppendInt16(b, m.ProducerEpoch)
	b = kbin.AppendInt32(b, m.TimeoutMs)
	b = kbin.AppendInt8(b, int8(m.State))
	if m.State == Empty || len(m.Partitions) == 0 {
		b = kbin.AppendInt32(b, -1)
	} else {
		var topics []string
		for i, tp := range m.Partitions {
			if i == 0 || tp.Topic != m.Partitions[i-1].Topic {
				topics = append(topics, tp.Topic)
			}
		}
		b = kbin.AppendInt32(b, int32(len(topics)))
		i := 0
		for _, t := range topics {
			b = kbin.AppendString(b, t)
			j := i
			for j < len(m.Partitions) && m.Partitions[j].Topic == t {
				j++
			}
			b = kbin.AppendInt32(b, int32(j-i))
			for ; i < j; i++ {
				b = kbin.AppendInt32(b, m.Partitions[i].Partition)
			}
		}
	}
	b = kbin.AppendInt64(b, m.UpdateMs)
	return kbin.AppendInt64(b, m.StartMs)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("txn: "+format+": %w", append(args, kerr.CorruptMessage)...)
}

// DecodeKey decodes a TransactionLogKey: the transactional id.
func DecodeKey(key []byte) (string, error) {
	r := kbin.Reader{Src: key}
	v := r.Int16()
	id := r.String()
	if err := r.Complete(); err != nil {
		return "", corrupt("transaction log key of %d bytes: %v", len(key), err)
	}
	if v != 0 {
		return "", corrupt("transaction log key version %d unknown (want 0)", v)
	}
	return id, nil
}

// DecodeValue decodes a TransactionLogValue of id (versions 0 and 1; v1's tagged fields are
// skipped). Errors name what is wrong.
func DecodeValue(id string, value []byte) (Meta, error) {
	r := kbin.Reader{Src: value}
	v := r.Int16()
	if v < 0 || v > 1 {
		return Meta{}, corrupt("transaction log value version %d unknown (want 0 or 1)", v)
	}
	flex := v >= 1
	m := Meta{TransactionalID: id}
	m.ProducerID = r.Int64()
	m.ProducerEpoch = r.Int16()
	m.TimeoutMs = r.Int32()
	m.State = State(r.Int8())
	var nt int32
	if flex {
		nt = r.CompactArrayLen()
	} else {
		nt = r.ArrayLen()
	}
	if nt > int32(len(value)) {
		return Meta{}, corrupt("transaction %q: %d partitions topics in a %d-byte value", id, nt, len(value))
	}
	for i := int32(0); i < nt && r.Ok(); i++ {
		var t string
		var np int32
		if flex {
			t = r.CompactString()
			np = r.CompactArrayLen()
		} else {
			t = r.String()
			np = r.ArrayLen()
		}
		if np > int32(len(value)) {
			return Meta{}, corrupt("transaction %q topic %q: %d partitions in a %d-byte value", id, t, np, len(value))
		}
		for j := int32(0); j < np && r.Ok(); j++ {
			m.Partitions = append(m.Partitions, TP{t, r.Int32()})
		}
		if flex {
			skipTags(&r)
		}
	}
	m.UpdateMs = r.Int64()
	m.StartMs = r.Int64()
	if flex {
		skipTags(&r)
	}
	if !r.Ok() {
		return Meta{}, corrupt("transaction %q: value of %d bytes truncated", id, len(value))
	}
	if m.State < Empty || m.State > PrepareEpochFence {
		return Meta{}, corrupt("transaction %q: status %d unknown", id, int8(m.State))
	}
	m.Partitions = (&Meta{}).withPartitions(m.Partitions)
	return m, nil
}

func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}
