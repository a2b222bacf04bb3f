package target

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/workloads/spec"
)

// What a kafka:// target sees of a cluster through the Kafka protocol alone: per partition the
// leader, leader epoch, replicas and ISR (Metadata) and the HW and log start (ListOffsets
// latest / earliest), sampled at partitions.csv's period (100 ms up to 100 partitions) like the embedded target's, and
// the brokers' advertised addresses for exec faults. No replica's LEO is visible to a Kafka
// client (it is the broker's JMX kafka.log:type=Log,name=LogEndOffset): partitions.csv writes
// "n/a" for it.

// FreshMetadata is the MetadataMinAge of the clients that watch the cluster (kgo's least):
// kadm answers Metadata (and finds leaders) from kgo's cache while it is younger.
const FreshMetadata = 10 * time.Millisecond

// kafkaSampleTimeout bounds one partition-timeline sample (Metadata + ListOffsets).
const kafkaSampleTimeout = time.Second

// SamplePartitions implements partitionSampler: Metadata for leader, epoch, replicas and
// ISR, ListOffsets for the HW (latest, read_uncommitted) and the log start (earliest). An
// offset the leader did not answer (it is moving) is -1.
func (k *kafkaTarget) SamplePartitions(topic string) ([]PartitionSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaSampleTimeout)
	defer cancel()
	md, err := k.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("partition timeline: metadata: %w", err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("partition timeline: metadata of %s: %v", topic, td.Err)
	}
	// Both listings are sharded to the partitions' leaders; a failed one leaves -1s.
	ends, _ := k.adm.ListEndOffsets(ctx, topic)
	starts, _ := k.adm.ListStartOffsets(ctx, topic)
	offset := func(lo kadm.ListedOffsets, p int32) int64 {
		if o, ok := lo.Lookup(topic, p); ok && o.Err == nil {
			return o.Offset
		}
		return -1
	}
	out := make([]PartitionSample, 0, len(td.Partitions))
	for _, p := range td.Partitions.Sorted() {
		s := PartitionSample{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, ISR: p.ISR, HW: -1, LogStart: -1, NoLEO: true}
		if p.Err != nil || p.Leader < 0 {
			s.Leader = -1
		} else {
			s.HW, s.LogStart = offset(ends, p.Partition), offset(starts, p.Partition)
		}
		out = append(out, s)
	}
	return out, nil
}

// ResolveBroker implements execResolver from the cluster's metadata: a broker id must be one
// of the cluster's brokers; leader is the partition's leader; follower the first ISR member
// that does not lead it (else any replica that does not), any-follower a random one of them.
func (k *kafkaTarget) ResolveBroker(ctx context.Context, topic string, ref spec.TargetRef) (ExecBroker, error) {
	t := ref.Topic
	if t == "" {
		t = topic
	}
	md, err := k.adm.Metadata(ctx, t)
	if err != nil {
		return ExecBroker{}, fmt.Errorf("resolving %s: metadata: %w", ref, err)
	}
	broker := func(id int32) (ExecBroker, error) {
		for _, b := range md.Brokers {
			if b.NodeID == id {
				return ExecBroker{ID: id, Host: b.Host, Port: int(b.Port)}, nil
			}
		}
		ids := make([]int32, 0, len(md.Brokers))
		for _, b := range md.Brokers {
			ids = append(ids, b.NodeID)
		}
		slices.Sort(ids)
		return ExecBroker{}, fmt.Errorf("fault target %s: no broker %d in the cluster's metadata (brokers %v)", ref, id, ids)
	}
	if ref.Role == "id" {
		return broker(ref.ID)
	}
	td, ok := md.Topics[t]
	if !ok || td.Err != nil {
		return ExecBroker{}, fmt.Errorf("fault target %s: topic %s: %v", ref, t, td.Err)
	}
	p, ok := td.Partitions[int32(ref.Partition)]
	if !ok {
		return ExecBroker{}, fmt.Errorf("fault target %s: no partition %s-%d", ref, t, ref.Partition)
	}
	if ref.Role == "leader" {
		if p.Leader < 0 || p.Err != nil {
			return ExecBroker{}, fmt.Errorf("fault target %s: %s-%d has no leader (%v)", ref, t, ref.Partition, p.Err)
		}
		return broker(p.Leader)
	}
	var cands []int32
	for _, set := range [][]int32{p.ISR, p.Replicas} {
		for _, r := range set {
			if r != p.Leader && !slices.Contains(cands, r) {
				cands = append(cands, r)
			}
		}
		if len(cands) > 0 {
			break
		}
	}
	if len(cands) == 0 {
		return ExecBroker{}, fmt.Errorf("fault target %s: %s-%d has no follower (leader %d, replicas %v)", ref, t, ref.Partition, p.Leader, p.Replicas)
	}
	if ref.Role == "any-follower" {
		return broker(cands[rand.IntN(len(cands))])
	}
	return broker(cands[0])
}
