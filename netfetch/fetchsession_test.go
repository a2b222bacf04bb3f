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

// noBroker opens sessions whose partitions are never fetched (the rules below need no broker).
func noBroker(follower bool) *broker.FetchSession {
	return (*broker.Broker)(nil).NewFetchSession(follower)
}

// TestFetchSessionRules pins KIP-227's session rules as Kafka's FetchSession.scala has them:
// epoch 0 opens a session, later epochs must follow it, forgotten partitions leave the
// session, a session left empty closes, epoch -1 closes it, and unknown ids and wrong epochs
// are errors. (What an incremental response carries is broker.FetchSession's, tested there
// and end to end in fetchsession_cluster_test.go.)
func TestFetchSessionRules(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions(10, func() time.Time { return now }, noBroker)
	st := &fetchState{}

	// Full request, epoch 0: a session opens with the three partitions.
	r := sessionRequest(0, 0, []int32{0, 1, 2}, nil)
	req := toBroker(r, st)
	sf := fs.begin(r, req)
	if !sf.create || sf.session != nil {
		t.Fatalf("epoch 0: create %v session %v; want a full fetch that opens one", sf.create, sf.session)
	}
	fs.finish(&sf, false, req.Partitions)
	if sf.respID == 0 || fs.Len() != 1 {
		t.Fatalf("full fetch: session %d, %d sessions; want one", sf.respID, fs.Len())
	}
	id := sf.respID
	if n := fs.get(id).bs.Len(); n != 3 {
		t.Fatalf("session holds %d partitions, want 3", n)
	}

	// Incremental, epoch 1, naming nothing: it runs on the session.
	r = sessionRequest(id, 1, nil, nil)
	if sf = fs.begin(r, toBroker(r, st)); sf.errCode != 0 || sf.session == nil || sf.respID != id {
		t.Fatalf("incremental: error %d, session %v, response id %d; want session %d", sf.errCode, sf.session, sf.respID, id)
	}

	// The epoch must follow: a replay of epoch 1 and an unknown id are errors.
	if sf := fs.begin(r, toBroker(r, st)); sf.errCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Errorf("stale epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", sf.errCode)
	}
	r = sessionRequest(id+1, 1, nil, nil)
	if sf := fs.begin(r, toBroker(r, st)); sf.errCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", sf.errCode)
	}

	// Forgetting 0 and adding 3: the session is [1 2 3].
	r = sessionRequest(id, 2, []int32{3}, []int32{0})
	if sf = fs.begin(r, toBroker(r, st)); sf.session == nil || sf.session.bs.Len() != 3 {
		t.Fatalf("after forget 0, add 3: session %v; want 3 partitions", sf.session)
	}

	// Forgetting everything closes the session; epoch -1 closes one too.
	r = sessionRequest(id, 3, nil, []int32{1, 2, 3})
	req = toBroker(r, st)
	if sf := fs.begin(r, req); sf.session != nil || fs.Len() != 0 || len(req.Partitions) != 0 {
		t.Fatalf("emptied session: still %d sessions, fetch over %d partitions", fs.Len(), len(req.Partitions))
	}
	r = sessionRequest(0, 0, []int32{0}, nil)
	req = toBroker(r, st)
	sf = fs.begin(r, req)
	fs.finish(&sf, false, req.Partitions)
	r = sessionRequest(sf.respID, -1, []int32{0}, nil)
	if sf := fs.begin(r, toBroker(r, st)); sf.session != nil || sf.create || fs.Len() != 0 {
		t.Fatalf("epoch -1: %d sessions left, create %v; want the session closed and none opened", fs.Len(), sf.create)
	}
}

// TestFetchSessionCacheEviction: a full cache evicts a session unused for two minutes; a
// follower's new session evicts the least recently used consumer session; a consumer's
// evicts no live session, and then gets none (session id 0: it goes on with full fetches).
func TestFetchSessionCacheEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions(2, func() time.Time { return now }, noBroker)
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
	if none := newFetchSessions(0, time.Now, noBroker).create(true, one); none != nil {
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
