package controller

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// Controller is the in-process metadata plane: brokers, topics, replica
// placement, leader election and ISR changes. Brokers call it directly.
//
// All methods are safe for concurrent use by any number of goroutines. One
// mutex (mu) guards the state; no method calls out (subscription callbacks,
// Offsets) while holding it.
type Controller struct {
	cfg       Config
	now       func() int64
	timeoutNs int64

	mu struct {
		sync.Mutex
		brokers map[int32]*brokerState
		topics  map[string]*topicState
		// created counts created topics; topic k's placement starts at
		// broker index k % n so that topics do not all start at one broker.
		created int
		offsets Offsets
		// subs holds every subscriber whose delivery goroutine has not
		// exited yet (cancelled ones included until then, for Sync).
		subs   map[*subscriber]struct{}
		closed bool
		// counters of Stats (gauges are computed in Stats).
		elections, unclean, lost, isrChanges, isrShrinks int64
	}
}

type brokerState struct {
	info          BrokerInfo
	lastHeartbeat int64 // ns, cfg.Now clock
	// fencedBySession is true while the broker is fenced because its
	// session expired: its next heartbeat unfences it (as KRaft unfences a
	// broker that heartbeats again). A broker fenced by BrokerDown stays
	// fenced until BrokerUp or RegisterBroker.
	fencedBySession bool
}

type topicState struct {
	name    string
	configs map[string]string // validated overrides only
	parts   []PartitionState  // index = partition id; owned by the controller
}

// New returns a Controller with no brokers and no topics.
func New(cfg Config) *Controller {
	c := &Controller{cfg: cfg, now: cfg.Now}
	if c.now == nil {
		c.now = func() int64 { return time.Now().UnixNano() }
	}
	ms := cfg.BrokerSessionTimeoutMs
	if ms <= 0 {
		ms = DefaultBrokerSessionTimeoutMs
	}
	c.timeoutNs = ms * int64(time.Millisecond)
	c.mu.brokers = make(map[int32]*brokerState)
	c.mu.topics = make(map[string]*topicState)
	c.mu.subs = make(map[*subscriber]struct{})
	return c
}

// SetOffsets installs the Offsets used to count offsets lost by unclean
// elections (Stats.LostOffsets). nil disables the counting.
func (c *Controller) SetOffsets(o Offsets) {
	c.mu.Lock()
	c.mu.offsets = o
	c.mu.Unlock()
}

// RegisterBroker registers broker id as alive (unfenced) with a heartbeat at
// the current time. Registering a known broker again updates its address
// and, if it was fenced, unfences it as BrokerUp does (a restarted broker
// registers again).
func (c *Controller) RegisterBroker(id int32, host string, port int32) {
	c.mu.Lock()
	b, ok := c.mu.brokers[id]
	if !ok {
		c.mu.brokers[id] = &brokerState{
			info:          BrokerInfo{ID: id, Host: host, Port: port, Alive: true},
			lastHeartbeat: c.now(),
		}
		c.mu.Unlock()
		return
	}
	b.info.Host, b.info.Port = host, port
	b.lastHeartbeat = c.now()
	fenced := !b.info.Alive
	c.mu.Unlock()
	if fenced {
		c.brokerUp(id, false)
	}
}

// Heartbeat records that broker id is alive at the current time. A broker
// fenced by an expired session (CheckSessions) is unfenced by its next
// heartbeat, with the elections of BrokerUp; a broker fenced by BrokerDown
// is not (a heartbeat racing with a kill must not revive it). Unknown ids
// are ignored.
func (c *Controller) Heartbeat(id int32) {
	c.mu.Lock()
	b, ok := c.mu.brokers[id]
	if !ok {
		c.mu.Unlock()
		return
	}
	b.lastHeartbeat = c.now()
	revive := !b.info.Alive && b.fencedBySession
	c.mu.Unlock()
	if revive {
		c.brokerUp(id, true)
	}
}

// CheckSessions fences every alive broker whose last heartbeat is older than
// broker.session.timeout.ms (now - last > timeout), stalest first, each as
// BrokerDown does. The embedded cluster calls it periodically (or use Run).
func (c *Controller) CheckSessions() {
	now := c.now()
	c.mu.Lock()
	var expired []*brokerState
	for _, b := range c.mu.brokers {
		if b.info.Alive && now-b.lastHeartbeat > c.timeoutNs {
			expired = append(expired, b)
		}
	}
	sort.Slice(expired, func(i, j int) bool {
		if expired[i].lastHeartbeat != expired[j].lastHeartbeat {
			return expired[i].lastHeartbeat < expired[j].lastHeartbeat
		}
		return expired[i].info.ID < expired[j].info.ID
	})
	ids := make([]int32, len(expired))
	for i, b := range expired {
		ids[i] = b.info.ID
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.brokerDown(id, true)
	}
}

// Run calls CheckSessions every `every` until ctx is done, then returns
// ctx.Err(). every must be positive.
func (c *Controller) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		panic("BUG: controller.Run: non-positive interval")
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			c.CheckSessions()
		}
	}
}

// Brokers returns every registered broker, ordered by id.
func (c *Controller) Brokers() []BrokerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]BrokerInfo, 0, len(c.mu.brokers))
	for _, b := range c.mu.brokers {
		out = append(out, b.info)
	}
	slices.SortFunc(out, func(a, b BrokerInfo) int { return int(a.ID) - int(b.ID) })
	return out
}

// Broker returns broker id's registration.
func (c *Controller) Broker(id int32) (BrokerInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.mu.brokers[id]
	if !ok {
		return BrokerInfo{}, false
	}
	return b.info, true
}

// Stats returns the controller's counters and gauges.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Elections:        c.mu.elections,
		UncleanElections: c.mu.unclean,
		LostOffsets:      c.mu.lost,
		ISRChanges:       c.mu.isrChanges,
		ISRShrinks:       c.mu.isrShrinks,
	}
	for _, t := range c.mu.topics {
		for i := range t.parts {
			if t.parts[i].Leader == NoLeader {
				s.OfflinePartitions++
			}
		}
	}
	for _, b := range c.mu.brokers {
		if b.info.Alive {
			s.ActiveBrokers++
		} else {
			s.FencedBrokers++
		}
	}
	return s
}

// Close stops every subscription's delivery (as their cancel functions do).
// The controller's state stays readable; later Subscribe calls get a
// subscription that delivers nothing.
func (c *Controller) Close() {
	c.mu.Lock()
	c.mu.closed = true
	subs := make([]*subscriber, 0, len(c.mu.subs))
	for s := range c.mu.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
}

// aliveLocked reports whether broker id is registered and not fenced.
func (c *Controller) aliveLocked(id int32) bool {
	b, ok := c.mu.brokers[id]
	return ok && b.info.Alive
}

// aliveIDsLocked returns the unfenced broker ids in ascending order.
func (c *Controller) aliveIDsLocked() []int32 {
	ids := make([]int32, 0, len(c.mu.brokers))
	for id, b := range c.mu.brokers {
		if b.info.Alive {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
