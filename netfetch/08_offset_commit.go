package netfetch

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	// v9+ is the consumer protocol of KIP-848 (member epochs), v10 topic ids.
	register(api{key: 8, min: 0, max: 8, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleOffsetCommit(req.(*kmsg.OffsetCommitRequest))
	}})
}

// handleOffsetCommit commits offsets: partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION and metadata over offset.metadata.max.bytes
// OFFSET_METADATA_TOO_LARGE; the rest are checked against the group's generation and
// member and written to __consumer_offsets with acks=all, one record per partition.
// v0 (no generation) commits as a client outside group management (generation -1).
func (c *conn) handleOffsetCommit(req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
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
				ts := now
				if req.Version == 1 && p.Timestamp >= 0 {
					ts = p.Timestamp
				}
				epoch := int32(-1)
				if req.Version >= 6 {
					epoch = p.LeaderEpoch
				}
				offs[tp] = group.Committed{Offset: p.Offset, LeaderEpoch: epoch, Metadata: meta, CommitTimestamp: ts}
			}
		}
	}
	if len(offs) > 0 {
		cr := group.CommitRequest{Group: req.Group, Generation: -1}
		if req.Version >= 1 {
			cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, strOrEmpty(req.InstanceID)
		}
		if err := coord.Commit(c.ctx, cr, offs); err != nil {
			for tp := range offs {
				perPart[tp] = err
			}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = errCode(perPart[group.TP{Topic: t.Topic, Partition: p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// partitionExists reports whether the controller knows topic-partition.
func (c *conn) partitionExists(topic string, p int32) bool {
	if c.s.cfg.Controller == nil {
		return false
	}
	_, ok := c.s.cfg.Controller.Partition(topic, p)
	return ok
}

// checkCommitted is what OffsetCommit and TxnOffsetCommit check of each partition before the
// group does: the coordinator's error (cerr), an unknown topic or partition
// (UNKNOWN_TOPIC_OR_PARTITION), metadata over offset.metadata.max.bytes
// (OFFSET_METADATA_TOO_LARGE).
func (c *conn) checkCommitted(cerr error, tp group.TP, meta string, maxMeta int) error {
	switch {
	case cerr != nil:
		return cerr
	case !c.partitionExists(tp.Topic, tp.Partition):
		return kerr.UnknownTopicOrPartition
	case len(meta) > maxMeta:
		return fmt.Errorf("metadata of %d bytes exceeds offset.metadata.max.bytes %d: %w", len(meta), maxMeta, kerr.OffsetMetadataTooLarge)
	}
	return nil
}
