package netfetch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// sessionRequest is a Fetch v12 on session id at epoch, naming parts of topic "t" at
// offset 0 and forgetting forget.
func sessionRequest(id, epoch int32, parts []int32, forget []int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(12)
	r.ReplicaID, r.SessionID, r.SessionEpoch = -1, id, epoch
	if len(parts) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "t"
		for _, p := range parts {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
			t.Partitions = append(t.Partitions, fp)
		}
		r.Topics = append(r.Topics, t)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = "t", forget
		r.ForgottenTopics = append(r.ForgottenTopics, ft)
	}
	return r
}

// toBroker is the broker request handleFetch builds from r.
func toBroker(r *kmsg.FetchRequest, st *fetchState) *broker.FetchRequest {
	req := &st.req
	req.Partitions, st.spans = req.Partitions[:0], st.spans[:0]
	for _, t := range r.Topics {
		start := len(req.Partitions)
		for _, p := range t.Partitions {
			req.Partitions = append(req.Partitions, broker.FetchPartition{Topic: t.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset, MaxBytes: p.PartitionMaxBytes})
		}
		st.spans = append(st.spans, topicSpan{topic: t.Topic, start: start, end: len(req.Partitions)})
	}
	return req
}

// answer fills the fetch outputs as Broker.Fetch would: hw per partition.
func answer(req *broker.FetchRequest, hw map[int32]int64) {
	for i := range req.Partitions {
		p := &req.Partitions[i]
		p.HighWatermark, p.LogStartOffsetOut, p.Err = hw[p.Partition], 0, nil
	}
}

func partitionsOf(parts []broker.FetchPartition) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p.Partition)
	}
	return out
}

// TestFetchSessionRules pins KIP-227's session rules as Kafka's FetchSession.scala has them:
// epoch 0 opens a session, later epochs must follow it, an incremental request runs over
// every session partition and its response leaves out the unchanged ones, forgotten
// partitions leave the session, epoch -1 closes it, and unknown ids and wrong epochs are
// errors.
func TestFetchSessionRules(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions(10, func() time.Time { return now })
	st := &fetchState{}

	// Full request, epoch 0: a session opens with the three partitions, all in the response.
	r := sessionRequest(0, 0, []int32{0, 1, 2}, nil)
	req := toBroker(r, st)
	sf := fs.begin(r, req, st)
	answer(req, map[int32]int64{0: 5, 1: 7, 2: 0})
	parts, _ := fs.finish(&sf, st, false, req.Partitions, st.spans)
	if sf.respID == 0 || len(parts) != 3 || fs.Len() != 1 {
		t.Fatalf("full fetch: session %d, %d partitions answered, %d sessions; want a session and 3", sf.respID, len(parts), fs.Len())
	}
	id := sf.respID

	// Incremental, epoch 1, naming nothing: the fetch still covers every partition; only
	// partition 1, whose HW moved, is answered.
	r = sessionRequest(id, 1, nil, nil)
	req = toBroker(r, st)
	sf = fs.begin(r, req, st)
	if sf.errCode != 0 || fmt.Sprint(partitionsOf(req.Partitions)) != "[0 1 2]" {
		t.Fatalf("incremental: error %d, fetch over %v; want the session's [0 1 2]", sf.errCode, partitionsOf(req.Partitions))
	}
	answer(req, map[int32]int64{0: 5, 1: 9, 2: 0})
	parts, spans := fs.finish(&sf, st, false, req.Partitions, st.spans)
	if fmt.Sprint(partitionsOf(parts)) != "[1]" || len(spans) != 1 || sf.respID != id {
		t.Fatalf("incremental response %v (spans %v, session %d); want only [1] on session %d", partitionsOf(parts), spans, sf.respID, id)
	}

	// An error is always answered, and the partition again once the error is gone.
	r = sessionRequest(id, 2, nil, nil)
	req = toBroker(r, st)
	sf = fs.begin(r, req, st)
	answer(req, map[int32]int64{0: 5, 1: 9, 2: 0})
	req.Partitions[2].Err = kerr.NotLeaderForPartition
	if parts, _ = fs.finish(&sf, st, false, req.Partitions, st.spans); fmt.Sprint(partitionsOf(parts)) != "[2]" {
		t.Fatalf("with an error on 2: answered %v, want [2]", partitionsOf(parts))
	}
	r = sessionRequest(id, 3, nil, nil)
	req = toBroker(r, st)
	sf = fs.begin(r, req, st)
	answer(req, map[int32]int64{0: 5, 1: 9, 2: 0})
	if parts, _ = fs.finish(&sf, st, false, req.Partitions, st.spans); fmt.Sprint(partitionsOf(parts)) != "[2]" {
		t.Fatalf("after the error: answered %v, want [2] again", partitionsOf(parts))
	}

	// The epoch must follow: a replay of epoch 3 and an unknown id are errors.
	if sf := fs.begin(sessionRequest(id, 3, nil, nil), toBroker(sessionRequest(id, 3, nil, nil), st), st); sf.errCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Errorf("stale epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", sf.errCode)
	}
	if sf := fs.begin(sessionRequest(id+1, 1, nil, nil), toBroker(sessionRequest(id+1, 1, nil, nil), st), st); sf.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", sf.errCode)
	}

	// Forgetting 0 and adding 3: the session is [1 2 3].
	r = sessionRequest(id, 4, []int32{3}, []int32{0})
	req = toBroker(r, st)
	sf = fs.begin(r, req, st)
	if got := fmt.Sprint(partitionsOf(req.Partitions)); got != "[1 2 3]" {
		t.Fatalf("after forget 0, add 3: fetch over %s, want [1 2 3]", got)
	}
	answer(req, map[int32]int64{1: 9, 2: 0, 3: 0})
	if parts, _ = fs.finish(&sf, st, false, req.Partitions, st.spans); fmt.Sprint(partitionsOf(parts)) != "[3]" {
		t.Fatalf("new partition 3 answered %v, want [3] (its first answer)", partitionsOf(parts))
	}

	// Forgetting everything closes the session; epoch -1 closes one too.
	r = sessionRequest(id, 5, nil, []int32{1, 2, 3})
	req = toBroker(r, st)
	if sf := fs.begin(r, req, st); sf.session != nil || fs.Len() != 0 || len(req.Partitions) != 0 {
		t.Fatalf("emptied session: still %d sessions, fetch over %d partitions", fs.Len(), len(req.Partitions))
	}
	r = sessionRequest(0, 0, []int32{0}, nil)
	req = toBroker(r, st)
	sf = fs.begin(r, req, st)
	answer(req, nil)
	fs.finish(&sf, st, false, req.Partitions, st.spans)
	r = sessionRequest(sf.respID, -1, []int32{0}, nil)
	if sf := fs.begin(r, toBroker(r, st), st); sf.session != nil || sf.create || fs.Len() != 0 {
		t.Fatalf("epoch -1: %d sessions left, create %v; want the session closed and none opened", fs.Len(), sf.create)
	}
}

// TestFetchSessionCacheEviction: a full cache evicts a session unused for two minutes; a
// follower's new session evicts the least recently used consumer session; a consumer's
// evicts no live session, and then gets none (session id 0: it goes on with full fetches).
func TestFetchSessionCacheEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions(2, func() time.Time { return now })
	one := []broker.FetchPartition{{Topic: "t", Partition: 0}}
	a := fs.create(false, one)
	now = now.Add(time.Second)
	b := fs.create(false, one)
	if a == nil || b == nil || fs.Len() != 2 {
		t.Fatalf("two sessions in two slots: %v %v", a, b)
	}
	if c := fs.create(false, one); c != nil {
		t.Fatalf("a consumer evicted a live session")
	}
	f := fs.create(true, one)
	if f == nil || fs.get(a.id) != nil || fs.get(b.id) == nil {
		t.Fatalf("a follower's session: %v; want it to evict the older consumer session %d", f, a.id)
	}
	if g := fs.create(true, one); g == nil || fs.get(b.id) != nil {
		t.Fatalf("a second follower: want it to evict consumer session %d", b.id)
	}
	if h := fs.create(true, one); h != nil {
		t.Fatalf("a follower evicted a live follower session")
	}
	now = now.Add(fetchSessionEvictAfter)
	if c := fs.create(false, one); c == nil {
		t.Fatalf("a consumer could not evict a session unused for %s", fetchSessionEvictAfter)
	}
	if none := newFetchSessions(0, time.Now).create(true, one); none != nil {
		t.Fatal("max.incremental.fetch.session.cache.slots=0 opened a session")
	}
}

// TestSessionClientNamesOnlyChanges: the replica side of a session sends only the partitions
// whose position changed, and forgets the ones the fetcher no longer asks for.
func TestSessionClientNamesOnlyChanges(t *testing.T) {
	s := sessionClient{enabled: true}
	parts := []broker.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 5}, {Topic: "t", Partition: 1, FetchOffset: 7}}
	build := func(parts []broker.FetchPartition) *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.SessionID, r.SessionEpoch = s.requestIDs()
		t0 := kmsg.NewFetchRequestTopic()
		t0.Topic = "t"
		for _, p := range parts {
			if r.SessionEpoch > 0 && !s.changed(p) {
				continue
			}
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.CurrentLeaderEpoch = p.Partition, p.FetchOffset, p.CurrentLeaderEpoch
			fp.LogStartOffset, fp.PartitionMaxBytes = p.LogStartOffset, p.MaxBytes
			t0.Partitions = append(t0.Partitions, fp)
		}
		r.Topics = []kmsg.FetchRequestTopic{t0}
		if r.SessionEpoch > 0 {
			r.ForgottenTopics = s.appendForgotten(nil)
		}
		return r
	}
	r := build(parts)
	if r.SessionEpoch != 0 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("first request: epoch %d with %d partitions, want a full epoch 0", r.SessionEpoch, len(r.Topics[0].Partitions))
	}
	s.answered(r, 42)
	parts[1].FetchOffset = 9
	r = build(parts)
	if r.SessionID != 42 || r.SessionEpoch != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].Partition != 1 || len(r.ForgottenTopics) != 0 {
		t.Fatalf("second request: session %d epoch %d naming %+v forgetting %+v; want session 42 epoch 1 naming only partition 1",
			r.SessionID, r.SessionEpoch, r.Topics[0].Partitions, r.ForgottenTopics)
	}
	s.answered(r, 42)
	r = build(parts[1:])
	if len(r.Topics[0].Partitions) != 0 || len(r.ForgottenTopics) != 1 || fmt.Sprint(r.ForgottenTopics[0].Partitions) != "[0]" {
		t.Fatalf("third request: naming %+v forgetting %+v; want nothing named and partition 0 forgotten", r.Topics[0].Partitions, r.ForgottenTopics)
	}
	s.answered(r, 7) // a different id: the session is gone, start over
	if id, epoch := s.requestIDs(); id != 0 || epoch != 0 {
		t.Fatalf("after a foreign session id: next request session %d epoch %d, want a new full one", id, epoch)
	}
	if err := kerr.ErrorForCode(kerr.FetchSessionIDNotFound.Code); !errors.Is(err, kerr.FetchSessionIDNotFound) {
		t.Fatal(err)
	}
}
