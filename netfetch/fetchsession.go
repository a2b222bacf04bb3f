package netfetch

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// Incremental fetch sessions (KIP-227). A fetcher that holds many partitions sends them all
// once (a full fetch with session epoch 0); the broker keeps them in a session and answers
// with its id. Later requests (epoch 1, 2, ...) name only the partitions whose fetch
// position or limits changed and the ones to forget, and the response carries only the
// partitions with records, a new high watermark or log start, or an error. The broker still
// runs the fetch over every partition of the session (a follower's fetch records its
// position on the leader for each of them, which the ISR rules need), but neither side
// encodes or decodes the unchanged ones. Rules follow Kafka's FetchSession.scala:
//
//   - epoch -1 (FINAL): close the named session, if any; the request is full and sessionless.
//   - epoch 0 (INITIAL): close the named session, if any; the request is full and a new
//     session is created if the cache has a slot (else the response's session id is 0).
//   - epoch > 0: an incremental request on an existing session: unknown id ->
//     FETCH_SESSION_ID_NOT_FOUND, an epoch other than the expected one ->
//     INVALID_FETCH_SESSION_EPOCH. A session left with no partitions is closed.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions (Kafka's default 1000;
// 0 disables sessions). When it is full a new session evicts one unused for
// fetchSessionEvictAfter, or, for a follower, the least recently used consumer session;
// otherwise it is not created, and the client goes on with full fetches.

// fetchSessionEvictAfter is how long a session must go unused before a new one may evict it
// (Kafka's min.incremental.fetch.session.eviction.ms default).
const fetchSessionEvictAfter = 120 * time.Second

// fetchSessions is one broker's session cache. Safe for concurrent use.
type fetchSessions struct {
	slots int
	now   func() time.Time
	mu    struct {
		sync.Mutex
		byID map[int32]*fetchSession
	}
}

func newFetchSessions(slots int, now func() time.Time) *fetchSessions {
	fs := &fetchSessions{slots: slots, now: now}
	fs.mu.byID = map[int32]*fetchSession{}
	return fs
}

// fetchSession is one session's partitions in the order they were added. Guarded by mu: a
// request updates it under mu before its fetch runs and records the response under mu after.
type fetchSession struct {
	id       int32
	follower bool

	mu struct {
		sync.Mutex
		epoch    int32 // the epoch the next request must carry
		parts    []cachedPartition
		index    map[tpKey]int
		lastUsed time.Time
	}
}

type tpKey struct {
	topic     string
	partition int32
}

// cachedPartition is a session partition: the request fields the client last sent and the
// response fields the broker last sent (hw -1 after an error, so the partition is sent again).
type cachedPartition struct {
	topic              string
	partition          int32
	fetchOffset        int64
	currentLeaderEpoch int32
	logStartOffset     int64
	maxBytes           int32

	hw, lso, localLogStart int64
}

// Len is the number of sessions cached.
func (fs *fetchSessions) Len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.mu.byID)
}

func (fs *fetchSessions) remove(id int32) {
	if id == 0 {
		return
	}
	fs.mu.Lock()
	delete(fs.mu.byID, id)
	fs.mu.Unlock()
}

func (fs *fetchSessions) get(id int32) *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.byID[id]
}

// create makes a session of parts (their responses already recorded) if a slot is free or
// can be freed, else returns nil.
func (fs *fetchSessions) create(follower bool, parts []broker.FetchPartition) *fetchSession {
	if fs.slots <= 0 || len(parts) == 0 {
		return nil
	}
	now := fs.now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.mu.byID) >= fs.slots && !fs.evictLocked(follower, now) {
		return nil
	}
	s := &fetchSession{follower: follower}
	for {
		s.id = rand.Int32N(math.MaxInt32) + 1
		if fs.mu.byID[s.id] == nil {
			break
		}
	}
	s.mu.epoch = 1
	s.mu.lastUsed = now
	s.mu.index = make(map[tpKey]int, len(parts))
	s.mu.parts = make([]cachedPartition, 0, len(parts))
	for i := range parts {
		p := &parts[i]
		k := tpKey{p.Topic, p.Partition}
		if _, dup := s.mu.index[k]; dup {
			continue
		}
		s.mu.index[k] = len(s.mu.parts)
		cp := cachedPartition{topic: p.Topic, partition: p.Partition}
		cp.setRequest(p)
		cp.noteResponse(p)
		s.mu.parts = append(s.mu.parts, cp)
	}
	fs.mu.byID[s.id] = s
	return s
}

// evictLocked frees one slot: a session unused for fetchSessionEvictAfter, or for a
// follower the least recently used consumer session.
func (fs *fetchSessions) evictLocked(follower bool, now time.Time) bool {
	var victim *fetchSession
	var victimUsed time.Time
	for _, s := range fs.mu.byID {
		s.mu.Lock()
		used, isFollower := s.mu.lastUsed, s.follower
		s.mu.Unlock()
		stale := now.Sub(used) >= fetchSessionEvictAfter
		if !stale && (!follower || isFollower) {
			continue
		}
		if victim == nil || used.Before(victimUsed) {
			victim, victimUsed = s, used
		}
	}
	if victim == nil {
		return false
	}
	delete(fs.mu.byID, victim.id)
	return true
}

func (cp *cachedPartition) setRequest(p *broker.FetchPartition) {
	cp.fetchOffset, cp.currentLeaderEpoch = p.FetchOffset, p.CurrentLeaderEpoch
	cp.logStartOffset, cp.maxBytes = p.LogStartOffset, p.MaxBytes
}

// noteResponse records what the response tells the client about p and reports whether an
// incremental response must carry it (Kafka's CachedPartition.maybeUpdateResponseData).
func (cp *cachedPartition) noteResponse(p *broker.FetchPartition) bool {
	if p.Err != nil {
		cp.hw = -1 // sent again once the error is gone
		return true
	}
	must := p.Records.Size > 0
	if cp.hw != p.HighWatermark {
		cp.hw, must = p.HighWatermark, true
	}
	if cp.lso != p.LastStableOffset {
		cp.lso, must = p.LastStableOffset, true
	}
	if cp.localLogStart != p.LogStartOffsetOut {
		cp.localLogStart, must = p.LogStartOffsetOut, true
	}
	return must
}

// sessionFetch is what handleFetch does with a Fetch's session fields: run it sessionless,
// as a full fetch that may open a session, or on an existing session; or answer an error.
type sessionFetch struct {
	errCode int16         // whole-response error (no partitions), 0 if none
	session *fetchSession // the session an incremental request runs on
	create  bool          // a full request (epoch 0) that opens a session afterwards
	respID  int32         // the response's session_id
}

// begin applies r's session fields. For an incremental request it updates the session with
// the request's partitions and forgotten topics, advances the epoch and replaces
// req.Partitions and spans by the session's partitions (with their cached fetch positions).
func (fs *fetchSessions) begin(r *kmsg.FetchRequest, req *broker.FetchRequest, st *fetchState) sessionFetch {
	if r.Version < 7 || fs == nil {
		return sessionFetch{}
	}
	switch {
	case r.SessionEpoch == -1:
		fs.remove(r.SessionID)
		return sessionFetch{}
	case r.SessionEpoch == 0:
		fs.remove(r.SessionID)
		return sessionFetch{create: fs.slots > 0}
	}
	s := fs.get(r.SessionID)
	if s == nil {
		return sessionFetch{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.epoch != r.SessionEpoch {
		return sessionFetch{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	for i := range req.Partitions {
		p := &req.Partitions[i]
		k := tpKey{p.Topic, p.Partition}
		if j, ok := s.mu.index[k]; ok {
			s.mu.parts[j].setRequest(p)
			continue
		}
		s.mu.index[k] = len(s.mu.parts)
		cp := cachedPartition{topic: p.Topic, partition: p.Partition, hw: -1, lso: -1, localLogStart: -1}
		cp.setRequest(p)
		s.mu.parts = append(s.mu.parts, cp)
	}
	forgot := false
	for _, ft := range r.ForgottenTopics {
		for _, part := range ft.Partitions {
			k := tpKey{ft.Topic, part}
			if j, ok := s.mu.index[k]; ok {
				s.mu.parts[j].topic = "" // compacted below
				delete(s.mu.index, k)
				forgot = true
			}
		}
	}
	if forgot {
		kept := s.mu.parts[:0]
		for _, cp := range s.mu.parts {
			if cp.topic != "" {
				s.mu.index[tpKey{cp.topic, cp.partition}] = len(kept)
				kept = append(kept, cp)
			}
		}
		clear(s.mu.parts[len(kept):])
		s.mu.parts = kept
	}
	if len(s.mu.parts) == 0 {
		fs.remove(s.id)
		req.Partitions, st.spans = req.Partitions[:0], st.spans[:0]
		return sessionFetch{}
	}
	s.mu.epoch = nextFetchEpoch(s.mu.epoch)
	s.mu.lastUsed = fs.now()
	// The fetch runs over every session partition, in session order.
	req.Partitions = req.Partitions[:0]
	st.spans = st.spans[:0]
	for _, cp := range s.mu.parts {
		if n := len(st.spans); n == 0 || st.spans[n-1].topic != cp.topic {
			st.spans = append(st.spans, topicSpan{topic: cp.topic, start: len(req.Partitions)})
		}
		req.Partitions = append(req.Partitions, broker.FetchPartition{
			Topic: cp.topic, Partition: cp.partition, FetchOffset: cp.fetchOffset,
			CurrentLeaderEpoch: cp.currentLeaderEpoch, LogStartOffset: cp.logStartOffset, MaxBytes: cp.maxBytes,
			DivergingEpoch: -1, DivergingEndOffset: -1,
		})
		st.spans[len(st.spans)-1].end = len(req.Partitions)
	}
	return sessionFetch{session: s, respID: s.id}
}

// finish records the fetch's results: a full request with create set opens a session
// (respID is its id, 0 if the cache had no slot); an incremental one keeps, in st's
// response buffers, only the partitions the client must hear about. It reports the
// partitions and spans to encode.
func (fs *fetchSessions) finish(sf *sessionFetch, st *fetchState, follower bool, parts []broker.FetchPartition, spans []topicSpan) ([]broker.FetchPartition, []topicSpan) {
	switch {
	case sf.create:
		if s := fs.create(follower, parts); s != nil {
			sf.respID = s.id
		}
		return parts, spans
	case sf.session == nil:
		return parts, spans
	}
	s := sf.session
	s.mu.Lock()
	defer s.mu.Unlock()
	resp, rspans := st.respParts[:0], st.respSpans[:0]
	for i := range parts {
		p := &parts[i]
		j, ok := s.mu.index[tpKey{p.Topic, p.Partition}]
		if ok && !s.mu.parts[j].noteResponse(p) {
			continue // unchanged: left out
		}
		if n := len(rspans); n == 0 || rspans[n-1].topic != p.Topic {
			rspans = append(rspans, topicSpan{topic: p.Topic, start: len(resp)})
		}
		resp = append(resp, *p)
		rspans[len(rspans)-1].end = len(resp)
	}
	st.respParts, st.respSpans = resp, rspans
	return resp, rspans
}

// nextFetchEpoch is the epoch after e: 1..MaxInt32, wrapping to 1 (Kafka's FetchMetadata.nextEpoch).
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
