package netfetch

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// sessionClient is a replica fetch connection's side of an incremental fetch session
// (KIP-227, Kafka's FetchSessionHandler): what it last told the leader about each
// partition, so that a request names only what changed. Owned by the fetcher goroutine.
type sessionClient struct {
	enabled bool
	id      int32 // 0: no session (the next request is full, epoch 0)
	epoch   int32 // the next incremental request's epoch
	sent    map[tpKey]sentPartition
	gen     uint32 // marks the partitions of the current request (forgotten = older)
}

// sentPartition is the request fields the leader's session holds for a partition.
type sentPartition struct {
	fetchOffset        int64
	currentLeaderEpoch int32
	logStartOffset     int64
	maxBytes           int32
	gen                uint32
}

func (s *sessionClient) reset() {
	s.id, s.epoch = 0, 0
	clear(s.sent)
}

// requestIDs are the session_id and session_epoch of the next request: -1 without
// sessions (full, sessionless), 0 to open one, else the session's next epoch.
func (s *sessionClient) requestIDs() (id, epoch int32) {
	switch {
	case !s.enabled:
		return 0, -1
	case s.id == 0:
		return 0, 0
	}
	return s.id, s.epoch
}

// changed reports whether an incremental request must name p (new to the session, or its
// position, epoch, log start or limit changed), and marks p as part of the current request.
func (s *sessionClient) changed(p broker.FetchPartition) bool {
	k := tpKey{p.Topic, p.Partition}
	sp, ok := s.sent[k]
	if ok {
		sp.gen = s.gen + 1
		s.sent[k] = sp
	}
	return !ok || sp.fetchOffset != p.FetchOffset || sp.currentLeaderEpoch != p.CurrentLeaderEpoch ||
		sp.logStartOffset != p.LogStartOffset || sp.maxBytes != p.MaxBytes
}

// holds reports whether the session holds n partitions: with a request whose partitions are
// the previous one's, they are exactly the session's (a previous request named them all or
// left them in, and forgot the rest).
func (s *sessionClient) holds(n int) bool { return s.id != 0 && len(s.sent) == n }

// appendForgotten appends, grouped by topic, the session partitions the request does not
// name (they left this fetcher, or are truncating), which the leader must drop.
func (s *sessionClient) appendForgotten(dst []kmsg.FetchRequestForgottenTopic) []kmsg.FetchRequestForgottenTopic {
	for k, sp := range s.sent {
		if sp.gen == s.gen+1 {
			continue // named by changed() for this request
		}
		i := len(dst) - 1
		for ; i >= 0 && dst[i].Topic != k.topic; i-- {
		}
		if i < 0 {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic = k.topic
			dst = append(dst, ft)
			i = len(dst) - 1
		}
		dst[i].Partitions = append(dst[i].Partitions, k.partition)
	}
	return dst
}

// answered records a successful response to req: a full request opened session id (0:
// the leader kept none, the next request is full again); an incremental one moved the
// session on by what it named and forgot.
func (s *sessionClient) answered(req *kmsg.FetchRequest, id int32) {
	if !s.enabled {
		return
	}
	full := req.SessionEpoch <= 0
	if id == 0 || (!full && id != s.id) {
		s.reset()
		return
	}
	if full {
		s.reset()
		s.id, s.epoch = id, 1
		if s.sent == nil {
			s.sent = map[tpKey]sentPartition{}
		}
	} else {
		s.epoch = nextFetchEpoch(s.epoch)
		for _, ft := range req.ForgottenTopics {
			for _, p := range ft.Partitions {
				delete(s.sent, tpKey{ft.Topic, p})
			}
		}
	}
	s.gen++ // the marks changed() made for this request are now current
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			s.sent[tpKey{t.Topic, p.Partition}] = sentPartition{fetchOffset: p.FetchOffset, currentLeaderEpoch: p.CurrentLeaderEpoch,
				logStartOffset: p.LogStartOffset, maxBytes: p.PartitionMaxBytes, gen: s.gen}
		}
	}
}

// responseSessionID reads the session_id of a Fetch v7+ response body (after the header):
// throttle_time_ms int32, error_code int16, session_id int32.
func responseSessionID(body []byte) int32 {
	if len(body) < 10 {
		return 0
	}
	return int32(binary.BigEndian.Uint32(body[6:10]))
}
