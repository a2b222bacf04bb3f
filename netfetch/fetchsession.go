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
// partitions with records, a new high watermark, LSO or log start, or an error. The
// session's partitions live in a broker.FetchSession, which visits only the partitions that
// changed (it subscribes to each replica's changes), so an idle session costs the same at
// 10 partitions as at 10,000; the follower's position on the leader stays recorded for every
// partition (see broker.FetchSession). Rules follow Kafka's FetchSession.scala:
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
	open  func(follower bool) *broker.FetchSession
	mu    struct {
		sync.Mutex
		byID map[int32]*fetchSession
	}
}

// newFetchSessions returns a cache of slots sessions whose partitions open makes.
func newFetchSessions(slots int, now func() time.Time, open func(follower bool) *broker.FetchSession) *fetchSessions {
	fs := &fetchSessions{slots: slots, now: now, open: open}
	fs.mu.byID = map[int32]*fetchSession{}
	return fs
}

// fetchSession is one session: its id, the epoch its next request must carry, and its
// partitions (bs, which serialises the session's fetches).
type fetchSession struct {
	id       int32
	follower bool
	bs       *broker.FetchSession

	mu struct {
		sync.Mutex
		epoch    int32 // the epoch the next request must carry
		lastUsed time.Time
	}
}

type tpKey struct {
	topic     string
	partition int32
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
	s := fs.mu.byID[id]
	delete(fs.mu.byID, id)
	fs.mu.Unlock()
	if s != nil {
		s.bs.Close()
	}
}

func (fs *fetchSessions) get(id int32) *fetchSession {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.byID[id]
}

// create makes a session of parts (their responses, as the client heard them in a full
// response) if a slot is free or can be freed, else returns nil.
func (fs *fetchSessions) create(follower bool, parts []broker.FetchPartition) *fetchSession {
	if fs.slots <= 0 || len(parts) == 0 {
		return nil
	}
	s := &fetchSession{follower: follower, bs: fs.open(follower)}
	for i := range parts {
		s.bs.Set(&parts[i], true)
	}
	now := fs.now()
	s.mu.epoch = 1
	s.mu.lastUsed = now
	fs.mu.Lock()
	victim, ok := fs.evictLocked(follower, now)
	if ok {
		for {
			s.id = rand.Int32N(math.MaxInt32) + 1
			if fs.mu.byID[s.id] == nil {
				break
			}
		}
		fs.mu.byID[s.id] = s
	}
	fs.mu.Unlock()
	if victim != nil {
		go victim.bs.Close() // waits for a fetch parked on it: not this request's business
	}
	if !ok {
		s.bs.Close()
		return nil
	}
	return s
}

// evictLocked makes room for one session: ok when a slot is free or was freed (victim,
// removed from the cache, then to be closed by the caller outside fs.mu): a session unused
// for fetchSessionEvictAfter, or for a follower the least recently used consumer session.
func (fs *fetchSessions) evictLocked(follower bool, now time.Time) (victim *fetchSession, ok bool) {
	if len(fs.mu.byID) < fs.slots {
		return nil, true
	}
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
		return nil, false
	}
	delete(fs.mu.byID, victim.id)
	return victim, true
}

// sessionFetch is what handleFetch does with a Fetch's session fields: run it sessionless,
// as a full fetch that may open a session, or on an existing session; or answer an error.
type sessionFetch struct {
	errCode int16         // whole-response error (no partitions), 0 if none
	session *fetchSession // the session an incremental request runs on
	create  bool          // a full request (epoch 0) that opens a session afterwards
	respID  int32         // the response's session_id
}

// begin applies r's session fields. For an incremental request it checks and advances the
// epoch and applies the request's partitions (req.Partitions) and forgotten topics to the
// session; the fetch then runs on the session (broker.Broker.SessionFetch).
func (fs *fetchSessions) begin(r *kmsg.FetchRequest, req *broker.FetchRequest) sessionFetch {
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
	if s.mu.epoch != r.SessionEpoch {
		s.mu.Unlock()
		return sessionFetch{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	s.mu.epoch = nextFetchEpoch(s.mu.epoch)
	s.mu.lastUsed = fs.now()
	s.mu.Unlock()
	for i := range req.Partitions {
		s.bs.Set(&req.Partitions[i], false)
	}
	for _, ft := range r.ForgottenTopics {
		for _, part := range ft.Partitions {
			s.bs.Forget(ft.Topic, part)
		}
	}
	if s.bs.Len() == 0 {
		fs.remove(s.id)
		return sessionFetch{}
	}
	return sessionFetch{session: s, respID: s.id}
}

// finish records a full fetch's results: with create set it opens a session of parts
// (respID is its id, 0 if the cache had no slot).
func (fs *fetchSessions) finish(sf *sessionFetch, follower bool, parts []broker.FetchPartition) {
	if sf.create {
		if s := fs.create(follower, parts); s != nil {
			sf.respID = s.id
		}
	}
}

// nextFetchEpoch is the epoch after e: 1..MaxInt32, wrapping to 1 (Kafka's FetchMetadata.nextEpoch).
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
