package netfetch

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	// v3 adds KIP-447's generation, member id and group.instance.id; v4 (KIP-890) and
	// v5+ are not advertised.
	register(api{key: 28, min: 0, max: 3, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleTxnOffsetCommit(req.(*kmsg.TxnOffsetCommitRequest))
	}})
}

// handleTxnOffsetCommit commits offsets inside the producer's transaction (core/group
// TxnCommit): checked against the group's generation and member (v3, KIP-447), written to
// __consumer_offsets as the producer's transactional batch with acks=all, and visible to
// OffsetFetch only once the transaction commits. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// below v3.
func (c *conn) handleTxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	coord, cerr := c.coordinator()
	now := time.Now().UnixMilli()
	perPart := map[group.TP]error{}
	offs := map[group.TP]group.Committed{}
	maxMeta := c.s.groupConfig().OffsetMetadataMaxBytes
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := group.TP{Topic: t.Topic, Partition: p.Partition}
			meta := strOrEmpty(p.Metadata)
			if err := c.checkCommitted(cerr, tp, meta, maxMeta); err != nil {
				perPart[tp] = err
			} else {
				epoch := int32(-1)
				if req.Version >= 2 {
					epoch = p.LeaderEpoch
				}
				offs[tp] = group.Committed{Offset: p.Offset, LeaderEpoch: epoch, Metadata: meta, CommitTimestamp: now}
			}
		}
	}
	if len(offs) > 0 {
		tr := group.TxnCommitRequest{CommitRequest: group.CommitRequest{Group: req.Group, Generation: -1}, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		if req.Version >= 3 {
			tr.Generation, tr.MemberID, tr.InstanceID = req.Generation, req.MemberID, strOrEmpty(req.InstanceID)
		}
		c.awaitGroupLoad(coord, req.Group)
		if err := coord.TxnCommit(c.ctx, tr, offs); err != nil {
			for tp := range offs {
				perPart[tp] = err
			}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = txnErrCode(perPart[group.TP{Topic: t.Topic, Partition: p.Partition}], req.Version, 3)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// groupLoadWait bounds how long a TxnOffsetCommit waits for this broker to load the group's
// __consumer_offsets partition it leads.
const groupLoadWait = 10 * time.Second

// awaitGroupLoad waits (groupLoadWait at most) until the group coordinator serves groupID
// when this broker leads its __consumer_offsets partition (or was elected its leader and has
// not applied it yet): a producer commits its offsets
// right after the topic was created by its FindCoordinator, and some clients (kafkajs) do not
// retry a TxnOffsetCommit answered NOT_COORDINATOR while the partition loads.
func (c *conn) awaitGroupLoad(coord *group.Coordinator, groupID string) {
	b := c.s.cfg.Broker
	if b == nil {
		return
	}
	p := group.PartitionFor(groupID, coord.Config().OffsetsTopicNumPartitions)
	r, ok := b.Replica(group.OffsetsTopic, p)
	leads := ok && r.IsLeader()
	if ctrl := c.s.cfg.Controller; !leads && ctrl != nil {
		// elected here, not applied yet: FindCoordinator already named this broker
		st, ok := ctrl.Partition(group.OffsetsTopic, p)
		leads = ok && st.Leader == c.s.cfg.BrokerID
	}
	if !leads {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, groupLoadWait)
	defer cancel()
	_ = coord.WaitReady(ctx, groupID)
}
