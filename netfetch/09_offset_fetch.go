package netfetch

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	// v8 batches groups (KIP-709); v9+ carries KIP-848 member epochs.
	register(api{key: 9, min: 0, max: 8, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleOffsetFetch(req.(*kmsg.OffsetFetchRequest))
	}})
}

// fetchedPartition is one partition of an OffsetFetch answer.
type fetchedPartition struct {
	p   int32
	c   group.Committed
	ok  bool // committed
	err error
}

// handleOffsetFetch returns committed offsets: -1 (and no metadata) for a partition without
// a commit; a null topic list (v2+) returns every committed partition of the group. There
// are no pending transactional commits, so require_stable (v7+) never waits.
func (c *conn) handleOffsetFetch(req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var topics []kmsg.OffsetFetchRequestTopic
			if g.Topics != nil {
				topics = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range g.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			byTopic, err := c.fetchOffsets(g.Group, topics, req.RequireStable)
			rg.ErrorCode = errCode(err)
			for _, t := range offsetTopics(byTopic) { // the same fields, batched by group
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, rp := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition(rp))
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	topics := req.Topics
	if req.Version < 2 && topics == nil {
		topics = []kmsg.OffsetFetchRequestTopic{} // v0-v1 cannot ask for all
	}
	byTopic, err := c.fetchOffsets(req.Group, topics, req.Version >= 7 && req.RequireStable)
	if err != nil && req.Version >= 2 {
		resp.ErrorCode = errCode(err)
	}
	resp.Topics = offsetTopics(byTopic)
	return resp, nil
}

// offsetTopics is the answer for the looked-up partitions, topics by name: -1 (and empty
// metadata) for a partition without a commit.
func offsetTopics(byTopic map[string][]fetchedPartition) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range sortedTopics(byTopic) {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t
		for _, fp := range byTopic[t] {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = fp.p, -1, -1, strPtr("")
			if fp.ok {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = fp.c.Offset, fp.c.LeaderEpoch, strPtr(fp.c.Metadata)
			}
			rp.ErrorCode = errCode(fp.err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// fetchOffsets looks up the committed offsets of topics (nil = all committed partitions).
// A coordinator error is returned and also set on every asked partition (v0-v1 carry
// errors per partition only). With requireStable (v7+, KIP-447) a partition with offsets
// committed in a transaction not decided yet answers UNSTABLE_OFFSET_COMMIT.
func (c *conn) fetchOffsets(groupID string, topics []kmsg.OffsetFetchRequestTopic, requireStable bool) (map[string][]fetchedPartition, error) {
	out := map[string][]fetchedPartition{}
	var tps []group.TP
	if topics != nil {
		tps = []group.TP{}
		for _, t := range topics {
			for _, p := range t.Partitions {
				tps = append(tps, group.TP{Topic: t.Topic, Partition: p})
			}
		}
	}
	coord, err := c.coordinator()
	var got map[group.TP]group.Committed
	var unstable map[group.TP]bool
	if err == nil {
		got, err = coord.Committed(groupID, tps)
		if err == nil && requireStable {
			unstable = coord.PendingTxnOffsets(groupID)
		}
	}
	if tps == nil {
		for tp := range got {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b group.TP) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	for _, tp := range tps {
		cm, ok := got[tp]
		perr := err
		if unstable[tp] {
			perr = kerr.UnstableOffsetCommit
		}
		out[tp.Topic] = append(out[tp.Topic], fetchedPartition{p: tp.Partition, c: cm, ok: ok, err: perr})
	}
	return out, err
}

func sortedTopics(m map[string][]fetchedPartition) []string {
	ts := make([]string, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}
