package broker

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Replication throttles, as Kafka's ReplicationQuotaManager (KIP-73): each broker has a leader
// quota, leader.replication.throttled.rate, and a follower quota,
// follower.replication.throttled.rate (bytes/s, dynamic broker configs; unlimited by
// default). They apply to the throttled replicas only, named per topic by the topic configs
// leader.replication.throttled.replicas (on the brokers that serve the partition's data) and
// follower.replication.throttled.replicas (on the brokers that fetch it): lists of
// partition:broker, or * for every replica of the topic.
//
//   - The leader leaves a throttled partition out of a replica fetch response (no records)
//     when the fetching replica is outside the ISR and the leader quota is exceeded; it
//     records the bytes of every throttled partition it sends (in-sync followers' too, so the
//     total stays under the bound).
//   - The follower leaves a throttled partition out of its fetch request when it is not
//     caught up with the leader's HW and the follower quota is exceeded; it records the bytes
//     it appends for every throttled partition.
//
// The quota is exceeded when the rate measured over the last replication.quota.window.num
// windows of replication.quota.window.size.seconds (11 of 1 s, Kafka's defaults; fixed
// here) is above the bound: the bytes recorded in the samples kept, divided by the time
// since the oldest sample began, but at least one window (Kafka's SimpleRate).

// Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults.
const (
	quotaSamples = 11
	quotaWindow  = time.Second
)

// Topic config names of the throttled replicas.
const (
	LeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// Dynamic broker config names of the throttle rates.
const (
	LeaderThrottledRate   = "leader.replication.throttled.rate"
	FollowerThrottledRate = "follower.replication.throttled.rate"
)

// ReplicationQuota is one broker's quota of one direction (leader or follower): a bound in
// bytes/s and the rate of the bytes recorded, sampled over windows of an injected clock.
// Safe for concurrent use (one mutex, taken only for throttled partitions).
type ReplicationQuota struct {
	now func() int64 // ns

	mu struct {
		sync.Mutex
		bound   int64 // bytes/s; math.MaxInt64 = unlimited
		samples []quotaSample
		cur     int
		total   int64 // bytes ever recorded
	}
	windowNs int64
	nSamples int
}

type quotaSample struct {
	start int64 // ns, when the sample's window began
	bytes int64
}

// NewReplicationQuota returns an unlimited quota of Kafka's 11 windows of 1 s on clock now
// (ns; nil = the wall clock).
func NewReplicationQuota(now func() int64) *ReplicationQuota {
	return newReplicationQuota(now, quotaSamples, quotaWindow)
}

func newReplicationQuota(now func() int64, samples int, window time.Duration) *ReplicationQuota {
	if now == nil {
		now = func() int64 { return time.Now().UnixNano() }
	}
	q := &ReplicationQuota{now: now, windowNs: int64(window), nSamples: samples}
	q.mu.bound = math.MaxInt64
	return q
}

// SetBound sets the bound in bytes/s (math.MaxInt64: unlimited; 0 lets nothing through once
// anything was recorded).
func (q *ReplicationQuota) SetBound(bytesPerSec int64) {
	q.mu.Lock()
	q.mu.bound = bytesPerSec
	q.mu.Unlock()
}

// Bound returns the bound in bytes/s.
func (q *ReplicationQuota) Bound() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.bound
}

// Record adds n bytes sent or received for throttled partitions, whether or not the quota
// is exceeded.
func (q *ReplicationQuota) Record(n int64) {
	if n <= 0 {
		return
	}
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.mu.samples) == 0 {
		q.mu.samples = append(q.mu.samples, quotaSample{start: now})
	}
	s := &q.mu.samples[q.mu.cur]
	if now-s.start >= q.windowNs {
		q.mu.cur = (q.mu.cur + 1) % q.nSamples
		if q.mu.cur >= len(q.mu.samples) {
			q.mu.samples = append(q.mu.samples, quotaSample{})
		}
		s = &q.mu.samples[q.mu.cur]
		*s = quotaSample{start: now}
	}
	s.bytes += n
	q.mu.total += n
}

// Total returns the bytes recorded since the quota was made.
func (q *ReplicationQuota) Total() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.total
}

// Rate returns the measured rate in bytes/s now.
func (q *ReplicationQuota) Rate() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rateLocked(q.now())
}

func (q *ReplicationQuota) rateLocked(now int64) float64 {
	if len(q.mu.samples) == 0 {
		return 0
	}
	var total int64
	oldest := int64(math.MaxInt64)
	for i := range q.mu.samples {
		s := &q.mu.samples[i]
		if now-s.start >= int64(q.nSamples)*q.windowNs {
			*s = quotaSample{start: now} // obsolete (Kafka's purgeObsoleteSamples)
		}
		total += s.bytes
		oldest = min(oldest, s.start)
	}
	elapsed := max(now-oldest, q.windowNs)
	return float64(total) / (float64(elapsed) / float64(time.Second))
}

// Exceeded reports whether the measured rate is above the bound.
func (q *ReplicationQuota) Exceeded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.bound == math.MaxInt64 {
		return false
	}
	return q.rateLocked(q.now()) > float64(q.mu.bound)
}

// ThrottledOn reports whether a throttled-replicas topic config value (a list of
// partition:broker, or *) names partition p on broker id. An invalid value (the controller
// refuses them) throttles nothing.
func ThrottledOn(value string, p, id int32) bool {
	value = strings.TrimSpace(value)
	if value == "*" {
		return true
	}
	for _, e := range strings.Split(value, ",") {
		ps, bs, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			continue
		}
		pn, err1 := strconv.ParseInt(ps, 10, 32)
		bn, err2 := strconv.ParseInt(bs, 10, 32)
		if err1 == nil && err2 == nil && int32(pn) == p && int32(bn) == id {
			return true
		}
	}
	return false
}

// Throttle bits of a hosted replica (hosted.throttle).
const (
	throttleLeader uint32 = 1 << iota
	throttleFollower
)

// applyThrottledLocked sets which quotas throttle replica h, from its topic configs
// (b.apply held).
func (b *Broker) applyThrottledLocked(h *hosted) {
	var bits uint32
	if ThrottledOn(h.topicConfigs[LeaderThrottledReplicas], h.key.partition, b.cfg.ID) {
		bits |= throttleLeader
	}
	if ThrottledOn(h.topicConfigs[FollowerThrottledReplicas], h.key.partition, b.cfg.ID) {
		bits |= throttleFollower
	}
	if h.throttle.Swap(bits) != bits {
		b.fetchPlanGen.Add(1) // the fetchers plan their next round afresh
	}
}

// applyThrottleRatesLocked sets the quotas' bounds from the broker's dynamic configs, else
// its static ones (b.apply held).
func (b *Broker) applyThrottleRatesLocked(configs map[string]string) {
	for _, q := range []struct {
		key    string
		static int64
		quota  *ReplicationQuota
	}{
		{LeaderThrottledRate, b.cfg.LeaderReplicationThrottledRate, b.quotas.leader},
		{FollowerThrottledRate, b.cfg.FollowerReplicationThrottledRate, b.quotas.follower},
	} {
		bound := q.static
		if bound <= 0 {
			bound = math.MaxInt64
		}
		if v, ok := configs[q.key]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				b.logf("broker %d: dynamic broker config %s=%q is not a rate in bytes/s (kept %d)", b.cfg.ID, q.key, v, bound)
			} else {
				bound = n
			}
		}
		q.quota.SetBound(bound)
	}
}

// LeaderQuota and FollowerQuota return the broker's replication quotas (for tests and
// metrics).
func (b *Broker) LeaderQuota() *ReplicationQuota   { return b.quotas.leader }
func (b *Broker) FollowerQuota() *ReplicationQuota { return b.quotas.follower }

// leaderThrottles reports whether the leader leaves h out of a fetch by replica: a throttled
// partition, the replica outside the ISR, the leader quota exceeded (Kafka's
// shouldLeaderThrottle).
func (b *Broker) leaderThrottles(h *hosted, replica int32) bool {
	return h.throttle.Load()&throttleLeader != 0 && !slices.Contains(h.r.ISR(), replica) && b.quotas.leader.Exceeded()
}

// recordLeaderThrottled records the bytes of a replica fetch response's throttled
// partitions in the leader quota (Kafka's sizeOfThrottledPartitions).
func (b *Broker) recordLeaderThrottled(parts []FetchPartition) {
	var n int64
	for i := range parts {
		if h := parts[i].hosted; h != nil && h.throttle.Load()&throttleLeader != 0 {
			n += parts[i].Records.Size
		}
	}
	b.quotas.leader.Record(n)
}

// followerThrottles reports whether the follower leaves fp out of its next fetch: a
// throttled partition, not caught up with the leader's HW, the follower quota exceeded
// (Kafka's shouldFollowerThrottle; the bytes are recorded as they are received, before
// the append). Fetcher.mu held.
func (b *Broker) followerThrottles(fp *fetchPart) bool {
	if fp.h.throttle.Load()&throttleFollower == 0 {
		return false
	}
	inSync := fp.leaderHW >= 0 && fp.h.r.LEO() >= fp.leaderHW
	return !inSync && b.quotas.follower.Exceeded()
}
