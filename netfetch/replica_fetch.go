package netfetch

import (
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The replica fetch protocol between isrbench brokers: a follower's fetcher sends Fetch,
// ListOffsets and OffsetForLeaderEpoch with replica_id set (replica_fetch_client.go, its
// incremental fetch session in replica_fetch_sessions_client.go); the leader answers them in
// 01_fetch.go, 02_list_offsets.go and 23_offset_for_leader_epoch.go through the broker. Both
// halves use one request type family: the fetcher's broker.FetchRequest (ReplicaID >= 0) is
// what the client encodes and what the leader's Broker.Fetch serves once decoded, and the
// client returns the answer as broker.FetchPartition outputs (records in RecordBytes).

// Versions the replica fetcher speaks (both ends are isrbench servers).
const (
	replicaFetchVersion        = 12
	replicaEpochVersion        = 4
	replicaListOffsetsVersion  = 7
	maxReplicaResponseBytes    = 1 << 30
	replicaDialTimeout         = 5 * time.Second
	replicaResponseHeaderBytes = 4
)

// The follower's broker epoch travels in Fetch's ReplicaState (KIP-903). Kafka defines it
// from Fetch v15, which also names topics by ID; isrbench's replica fetches are v12, so the
// same struct is sent as the same tagged field (tag 1: ReplicaId int32, ReplicaEpoch int64,
// no tags), which servers that do not know it skip.
const replicaStateTag = 1

func appendReplicaState(dst []byte, id int32, epoch int64) []byte {
	dst = kbin.AppendInt32(dst, id)
	dst = kbin.AppendInt64(dst, epoch)
	return append(dst, 0) // no tagged fields
}

// replicaEpochOf returns the broker epoch a replica Fetch carries in its ReplicaState
// (v15+ field, or the tag of an isrbench v12 request), or -1.
func replicaEpochOf(r *kmsg.FetchRequest) int64 {
	if r.ReplicaState.Epoch >= 0 {
		return r.ReplicaState.Epoch
	}
	epoch := int64(-1)
	r.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag != replicaStateTag {
			return
		}
		rd := kbin.Reader{Src: val}
		rd.Int32()
		if e := rd.Int64(); rd.Ok() {
			epoch = e
		}
	})
	return epoch
}
