package replicaverify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DebuggingReplicaID is the replica id of Kafka's debugging consumer
// (FetchRequest.DEBUGGING_CONSUMER_ID): a broker serves its Fetch and ListOffsets from its own
// replica, leader or follower.
const DebuggingReplicaID = -2

// Options selects what Verify checks.
type Options struct {
	// Topics selects the topics by name (nil: every topic, internal ones included, as
	// ReplicaVerificationTool's default --topics-include ".*").
	Topics *regexp.Regexp
	// Partitions selects partition numbers (empty: all).
	Partitions []int32
	// Time is where the comparison starts: -2 (earliest: the largest log start of the
	// replicas) or a timestamp in ms >= 0 (the leader's first offset at or after it).
	Time int64
	// FetchBytes is the most record bytes one fetch asks for (0: 1 MiB).
	FetchBytes int32
	// Parallel is the number of partitions compared at once (0: 4).
	Parallel int
	// From overrides the start per partition when it is later (a repeated pass continues
	// where the previous one verified up to: Partition.Verified).
	From map[TopicPartition]int64
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Replica is one replica of a partition as Verify saw it. Offsets are -1 when unknown.
type Replica struct {
	Broker   int32
	Leader   bool
	InISR    bool
	LogStart int64 // inclusive
	HW       int64 // exclusive: the replica's high watermark
	LEO      int64 // exclusive: the replica's log end offset
	// Lag is the leader's LEO minus this replica's (records, >= 0; -1 when either is
	// unknown). The two LEOs are read by one ListOffsets per broker, not at one instant.
	Lag int64
	// Err is why the replica could not be read ("" when it was): not checked then.
	Err string
}

// Partition is one partition's result.
type Partition struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []Replica
	// From and Verified bound the range compared on every readable replica: [From, Verified).
	From, Verified int64
	Batches        int // batches compared
	// Divergence is the first divergence found ("nil": none up to Verified).
	Divergence *Divergence
}

// Report is Verify's result, partitions sorted by topic and number.
type Report struct {
	Partitions []Partition
}

// Divergences returns every partition's divergence.
func (r *Report) Divergences() []Divergence {
	var out []Divergence
	for _, p := range r.Partitions {
		if p.Divergence != nil {
			out = append(out, *p.Divergence)
		}
	}
	return out
}

// Unchecked returns the replicas that could not be read, as "topic-partition replica N: why".
func (r *Report) Unchecked() []string {
	var out []string
	for _, p := range r.Partitions {
		for _, rp := range p.Replicas {
			if rp.Err != "" {
				out = append(out, fmt.Sprintf("%s-%d replica %d: %s", p.Topic, p.Partition, rp.Broker, rp.Err))
			}
		}
	}
	return out
}

// target is one partition to verify, from the metadata.
type target struct {
	topic    string
	id       [16]byte
	part     int32
	leader   int32
	replicas []int32
	isr      []int32
}

// Verify compares the replicas of the selected partitions of the cluster cl talks to and
// returns what it found. An error means the check could not run (metadata unavailable, no
// topic selected); replicas it could not read are in the report (Unchecked), divergences too.
func Verify(ctx context.Context, cl *kgo.Client, o Options) (*Report, error) {
	if o.Time < -2 || o.Time == -1 {
		return nil, fmt.Errorf("verify-replicas: time %d: want -2 (earliest) or a timestamp in ms >= 0", o.Time)
	}
	if o.FetchBytes <= 0 {
		o.FetchBytes = 1 << 20
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	ts, err := targets(ctx, cl, o)
	if err != nil {
		return nil, err
	}
	offs := logOffsets(ctx, cl, ts)
	rep := &Report{Partitions: make([]Partition, len(ts))}
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i := range ts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rep.Partitions[i] = verifyPartition(ctx, cl, o, ts[i], offs)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("verify-replicas: %w", err)
	}
	return rep, nil
}

// targets reads the metadata and returns the selected partitions, sorted.
func targets(ctx context.Context, cl *kgo.Client, o Options) ([]target, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("verify-replicas: metadata: %w", err)
	}
	var ts []target
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if o.Topics != nil && !o.Topics.MatchString(name) {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("verify-replicas: metadata of topic %s: %w", name, err)
		}
		for _, p := range t.Partitions {
			if len(o.Partitions) > 0 && !slices.Contains(o.Partitions, p.Partition) {
				continue
			}
			ts = append(ts, target{topic: name, id: t.TopicID, part: p.Partition, leader: p.Leader, replicas: p.Replicas, isr: p.ISR})
		}
	}
	if len(ts) == 0 {
		return nil, errors.New("verify-replicas: no partition selected: no topic matches, or the partitions named do not exist")
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].topic != ts[j].topic {
			return ts[i].topic < ts[j].topic
		}
		return ts[i].part < ts[j].part
	})
	return ts, nil
}

// replicaKey names one replica: a partition on a broker.
type replicaKey struct {
	topic  string
	part   int32
	broker int32
}

// offsets is one replica's log start and LEO (ListOffsets -2 and -1 as the debugging
// replica), or why they could not be read.
type offsets struct {
	start, end int64
	err        error
}

// logOffsets asks every broker, with one ListOffsets as the debugging replica, for the log
// start and LEO of each replica it hosts among ts.
func logOffsets(ctx context.Context, cl *kgo.Client, ts []target) map[replicaKey]offsets {
	byBroker := map[int32][]target{}
	for _, t := range ts {
		for _, b := range t.replicas {
			byBroker[b] = append(byBroker[b], t)
		}
	}
	out := map[replicaKey]offsets{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for b, parts := range byBroker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := brokerOffsets(ctx, cl, b, parts)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range got {
				out[k] = v
			}
		}()
	}
	wg.Wait()
	return out
}

func brokerOffsets(ctx context.Context, cl *kgo.Client, broker int32, parts []target) map[replicaKey]offsets {
	out := map[replicaKey]offsets{}
	for _, ts := range []int64{-2, -1} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = DebuggingReplicaID
		idx := map[string]int{}
		for _, p := range parts {
			i, ok := idx[p.topic]
			if !ok {
				i = len(req.Topics)
				idx[p.topic] = i
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = p.topic
				req.Topics = append(req.Topics, t)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p.part, ts
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		for _, p := range parts {
			k := replicaKey{p.topic, p.part, broker}
			o, seen := out[k]
			if !seen {
				o = offsets{start: -1, end: -1}
			}
			if err != nil {
				o.err = err
			}
			out[k] = o
		}
		if err != nil {
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				k := replicaKey{t.Topic, p.Partition, broker}
				o := out[k]
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					o.err = e
				} else if ts == -2 {
					o.start = p.Offset
				} else {
					o.end = p.Offset
				}
				out[k] = o
			}
		}
	}
	return out
}
