package group

import (
	"fmt"
	"math"
	"slices"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/config"
	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	// NewMemberJoinTimeoutMs bounds how long a new member's JoinGroup may wait in a
	// rebalance before the member is dropped (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs).
	NewMemberJoinTimeoutMs = 5 * 60 * 1000
	// maxStatsDurations bounds Stats.RebalanceMs.
	maxStatsDurations = 1000
)

// OffsetsTopic is the internal topic holding committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Config is the coordinator's part of the broker config, under Kafka's names. A value.
type Config struct {
	// InitialRebalanceDelayMs is group.initial.rebalance.delay.ms (default 3000): the first
	// rebalance of an Empty group waits this long for more members, extended while members
	// keep joining, up to the rebalance timeout.
	InitialRebalanceDelayMs int64
	// MinSessionTimeoutMs, MaxSessionTimeoutMs are group.min/max.session.timeout.ms (6000,
	// 1800000): a JoinGroup outside gets INVALID_SESSION_TIMEOUT.
	MinSessionTimeoutMs, MaxSessionTimeoutMs int32
	// MaxSize is group.max.size (default 2147483647 members).
	MaxSize int
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (default 50).
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor (default 3; the
	// topic gets min(this, alive brokers) replicas).
	OffsetsTopicReplicationFactor int16
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes (default 104857600).
	OffsetsTopicSegmentBytes int64
	// OffsetsCommitTimeoutMs is offsets.commit.timeout.ms (default 5000): how long a commit
	// or a group metadata write waits for acks=all.
	OffsetsCommitTimeoutMs int64
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (default 4096).
	OffsetMetadataMaxBytes int
	// OffsetsRetentionMinutes is offsets.retention.minutes (default 10080, 7 days): a
	// group's committed offsets expire this long after the group became Empty (KIP-211);
	// a standalone consumer's (generation -1, no protocol type) this long after their
	// commit, and so do those of a topic a Stable consumer group no longer subscribes to.
	OffsetsRetentionMinutes int32
	// OffsetsRetentionCheckIntervalMs is offsets.retention.check.interval.ms (default
	// 600000): how often expired offsets are removed (and tombstoned).
	OffsetsRetentionCheckIntervalMs int64
	// NewMemberID makes a member id for a new member of a client (default clientID-UUID).
	NewMemberID func(clientID string) string
	// Logf logs coordinator events (loads, failed writes); nil = silent.
	Logf func(format string, args ...any)
	// Manual makes the Coordinator start no goroutine: the caller drives it (Scan, Tick,
	// Poll) and uses its Async methods. The deterministic simulator does.
	Manual bool
}

// defaults is Kafka's defaults of Config, the registry's (core/config): config's package
// initialisation (its sorted registry) completes before this variable is set.
var defaults = Config{
	InitialRebalanceDelayMs:       config.DefaultOf("group.initial.rebalance.delay.ms"),
	MinSessionTimeoutMs:           int32(config.DefaultOf("group.min.session.timeout.ms")),
	MaxSessionTimeoutMs:           int32(config.DefaultOf("group.max.session.timeout.ms")),
	MaxSize:                       int(config.DefaultOf("group.max.size")),
	OffsetsTopicNumPartitions:     int32(config.DefaultOf("offsets.topic.num.partitions")),
	OffsetsTopicReplicationFactor: int16(config.DefaultOf("offsets.topic.replication.factor")),
	OffsetsTopicSegmentBytes:      config.DefaultOf("offsets.topic.segment.bytes"),
	OffsetsCommitTimeoutMs:        config.DefaultOf("offsets.commit.timeout.ms"),
	OffsetMetadataMaxBytes:        int(config.DefaultOf("offset.metadata.max.bytes")),

	OffsetsRetentionMinutes:         int32(config.DefaultOf("offsets.retention.minutes")),
	OffsetsRetentionCheckIntervalMs: config.DefaultOf("offsets.retention.check.interval.ms"),
}

// DefaultConfig returns Kafka's defaults, the registry's (core/config).
func DefaultConfig() Config { return defaults }

// withDefaults fills zero fields with Kafka's defaults (InitialRebalanceDelayMs 0 is kept:
// it is a legal setting; a negative value means the default).
func (c Config) withDefaults() Config {
	d := defaults
	if c.InitialRebalanceDelayMs < 0 {
		c.InitialRebalanceDelayMs = d.InitialRebalanceDelayMs
	}
	if c.MinSessionTimeoutMs <= 0 {
		c.MinSessionTimeoutMs = d.MinSessionTimeoutMs
	}
	if c.MaxSessionTimeoutMs <= 0 {
		c.MaxSessionTimeoutMs = d.MaxSessionTimeoutMs
	}
	if c.MaxSize <= 0 {
		c.MaxSize = d.MaxSize
	}
	if c.OffsetsTopicNumPartitions <= 0 {
		c.OffsetsTopicNumPartitions = d.OffsetsTopicNumPartitions
	}
	if c.OffsetsTopicReplicationFactor <= 0 {
		c.OffsetsTopicReplicationFactor = d.OffsetsTopicReplicationFactor
	}
	if c.OffsetsTopicSegmentBytes <= 0 {
		c.OffsetsTopicSegmentBytes = d.OffsetsTopicSegmentBytes
	}
	if c.OffsetsCommitTimeoutMs <= 0 {
		c.OffsetsCommitTimeoutMs = d.OffsetsCommitTimeoutMs
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = d.OffsetMetadataMaxBytes
	}
	if c.OffsetsRetentionMinutes <= 0 {
		c.OffsetsRetentionMinutes = d.OffsetsRetentionMinutes
	}
	if c.OffsetsRetentionCheckIntervalMs <= 0 {
		c.OffsetsRetentionCheckIntervalMs = d.OffsetsRetentionCheckIntervalMs
	}
	if c.NewMemberID == nil {
		c.NewMemberID = defaultMemberID
	}
	return c
}

// PartitionFor is the __consumer_offsets partition of a group: Utils.abs(groupId.hashCode) %
// partitions, as Kafka's GroupMetadataManager.partitionFor (Utils.abs maps MinInt32 to 0).
func PartitionFor(groupID string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	return broker.JavaAbs(broker.JavaStringHashCode(groupID)) % partitions
}

// Machine is the group coordinator's decision logic for the __consumer_offsets partitions one
// broker leads: Kafka's classic group state machine (Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead), members and generations, session / rebalance / join
// timeouts and the committed offsets. It does no I/O and starts no goroutine: every method
// takes the current time in ms, timers are deadlines the driver polls (NextDeadline, Tick),
// parked JoinGroup and SyncGroup requests are tickets answered through Drain, and writes to
// __consumer_offsets are records the driver appends before it calls the matching *Stored
// method.
//
// A Machine is not safe for concurrent use: the driver serializes calls (Coordinator holds
// one mutex around them, never across I/O).
type Machine struct {
	cfg    Config
	groups map[string]*group
	// owned: partitions of __consumer_offsets this coordinator leads; true = loaded,
	// false = loading (COORDINATOR_LOAD_IN_PROGRESS).
	owned   map[int32]bool
	replies []Reply
	stores  []GroupStore // background group metadata writes (DrainStores)
	// nextExpiry is when expired offsets are next removed (ms; 0: no partition loaded yet):
	// every offsets.retention.check.interval.ms from the first load.
	nextExpiry int64
}

// NewMachine returns a Machine that owns no partition yet.
func NewMachine(cfg Config) *Machine {
	return &Machine{cfg: cfg.withDefaults(), groups: map[string]*group{}, owned: map[int32]bool{}}
}

// Config returns the effective config.
func (m *Machine) Config() Config { return m.cfg }

// Partition is the __consumer_offsets partition of groupID.
func (m *Machine) Partition(groupID string) int32 {
	return PartitionFor(groupID, m.cfg.OffsetsTopicNumPartitions)
}

// Drain returns the answers to parked requests produced since the last Drain.
func (m *Machine) Drain() []Reply {
	r := m.replies
	m.replies = nil
	return r
}

// DrainStores returns the group metadata records to write produced since the last call (a
// group that became Empty, a static member's new member id); the driver reports each
// outcome with Stored.
func (m *Machine) DrainStores() []GroupStore {
	s := m.stores
	m.stores = nil
	return s
}

// check answers whether this coordinator may serve groupID now: NOT_COORDINATOR when it does
// not lead the group's partition, COORDINATOR_LOAD_IN_PROGRESS while loading it, and
// INVALID_GROUP_ID for an empty id.
func (m *Machine) check(groupID string) error {
	if groupID == "" {
		return fmt.Errorf("group id is empty: %w", kerr.InvalidGroupID)
	}
	loaded, ok := m.owned[m.Partition(groupID)]
	switch {
	case !ok:
		return kerr.NotCoordinator
	case !loaded:
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// Check is check for the driver and the wire layer.
func (m *Machine) Check(groupID string) error { return m.check(groupID) }

// BeginLoad marks partition p as led and loading: its groups answer
// COORDINATOR_LOAD_IN_PROGRESS until FinishLoad. Groups already held for p are dropped first.
func (m *Machine) BeginLoad(p int32) {
	m.Unload(p)
	m.owned[p] = false
}

// Loading reports whether p is owned and not yet loaded.
func (m *Machine) Loading(p int32) bool {
	loaded, ok := m.owned[p]
	return ok && !loaded
}

// Owns reports whether p is owned (loading or loaded).
func (m *Machine) Owns(p int32) bool {
	_, ok := m.owned[p]
	return ok
}

// FinishLoad installs the groups and offsets replayed from partition p's log: a group with
// members comes back Stable in its generation (their session timers start at now), one
// without members Empty. It is ignored unless p is loading.
func (m *Machine) FinishLoad(now int64, p int32, l *Loaded) {
	if loaded, ok := m.owned[p]; !ok || loaded {
		return
	}
	m.owned[p] = true
	if m.nextExpiry == 0 {
		m.nextExpiry = now + m.cfg.OffsetsRetentionCheckIntervalMs
	}
	if l == nil {
		return
	}
	for id, sg := range l.Groups {
		if PartitionFor(id, m.cfg.OffsetsTopicNumPartitions) != p {
			continue
		}
		g := newGroup(id, p)
		g.generation = sg.Generation
		g.protocolType = sg.ProtocolType
		g.protocol = sg.Protocol
		for _, sm := range sg.Members {
			g.addMember(&member{
				id: sm.MemberID, instanceID: sm.InstanceID, clientID: sm.ClientID, clientHost: sm.ClientHost,
				protocolType: sg.ProtocolType, sessionTimeoutMs: sm.SessionTimeout, rebalanceTimeoutMs: sm.RebalanceTimeout,
				protocols:  []Protocol{{Name: sg.Protocol, Metadata: sm.Subscription}},
				assignment: sm.Assignment, lastHeartbeat: now,
			})
		}
		if sg.Leader != "" && g.members[sg.Leader] != nil {
			g.leader = sg.Leader
		}
		if len(g.members) > 0 {
			g.state = Stable
		}
		g.stateTimestamp = max(sg.StateTimestampMs, -1)
		g.stats.Generation = g.generation
		m.groups[id] = g
	}
	for id, offs := range l.Offsets {
		if PartitionFor(id, m.cfg.OffsetsTopicNumPartitions) != p {
			continue
		}
		g := m.groups[id]
		if g == nil {
			g = newGroup(id, p)
			m.groups[id] = g
		}
		for tp, c := range offs {
			g.offsets[tp] = c
		}
	}
	for id, byPID := range l.TxnOffsets { // open transactions' offsets (txnoffsets.go)
		if PartitionFor(id, m.cfg.OffsetsTopicNumPartitions) != p || len(byPID) == 0 {
			continue
		}
		g := m.groups[id]
		if g == nil {
			g = newGroup(id, p)
			m.groups[id] = g
		}
		g.txnOffsets = byPID
	}
}

// Unload drops every group of partition p (leadership moved): their parked requests are
// answered NOT_COORDINATOR, so that clients find the new coordinator.
func (m *Machine) Unload(p int32) {
	delete(m.owned, p)
	for _, id := range slices.Sorted(mapsKeys(m.groups)) {
		g := m.groups[id]
		if g.partition != p {
			continue
		}
		m.failWaiters(g, kerr.NotCoordinator)
		g.state = Dead
		delete(m.groups, id)
	}
}

// UnloadAll unloads every partition (the coordinator shuts down).
func (m *Machine) UnloadAll() {
	for _, p := range slices.Sorted(mapsKeys(m.owned)) {
		m.Unload(p)
	}
}

// OwnedPartitions lists the owned partitions (loading or loaded), sorted.
func (m *Machine) OwnedPartitions() []int32 { return slices.Sorted(mapsKeys(m.owned)) }

func mapsKeys[K comparable, V any](mp map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range mp {
			if !yield(k) {
				return
			}
		}
	}
}

// failWaiters answers every parked request of g with err.
func (m *Machine) failWaiters(g *group, err error) {
	for _, id := range slices.Clone(g.order) {
		mb := g.members[id]
		if mb.awaitingJoin {
			m.replyJoin(mb, JoinResult{Err: err, MemberID: mb.id})
			mb.awaitingJoin = false
		}
		if mb.awaitingSync {
			m.replySync(mb, SyncResult{Err: err})
			mb.awaitingSync = false
		}
	}
}

func (m *Machine) replyJoin(mb *member, r JoinResult) {
	if mb.joinTicket != 0 {
		m.replies = append(m.replies, Reply{Ticket: mb.joinTicket, Join: &r})
	}
	mb.joinTicket = 0
}

func (m *Machine) replySync(mb *member, r SyncResult) {
	if mb.syncTicket != 0 {
		m.replies = append(m.replies, Reply{Ticket: mb.syncTicket, Sync: &r})
	}
	mb.syncTicket = 0
}

// Cancel forgets ticket t (its connection closed): the member stays in the rebalance as Kafka
// keeps a member whose socket closed while its JoinGroup waited; nothing is answered.
func (m *Machine) Cancel(groupID string, t Ticket) {
	g := m.groups[groupID]
	if g == nil || t == 0 {
		return
	}
	for _, mb := range g.members {
		if mb.joinTicket == t {
			mb.joinTicket = 0
		}
		if mb.syncTicket == t {
			mb.syncTicket = 0
		}
	}
}

// NextDeadline is the earliest time (ms) at which Tick has something to do, or
// math.MaxInt64.
func (m *Machine) NextDeadline() int64 {
	next := int64(math.MaxInt64)
	if m.nextExpiry > 0 {
		next = m.nextExpiry
	}
	for _, g := range m.groups {
		next = min(next, g.nextDeadline())
	}
	return next
}

func (g *group) nextDeadline() int64 {
	next := int64(math.MaxInt64)
	switch g.state {
	case PreparingRebalance:
		next = g.joinDeadline
	case CompletingRebalance:
		if !g.storing {
			next = g.syncDeadline
		}
	}
	for _, d := range g.pending {
		next = min(next, d)
	}
	for _, mb := range g.members {
		if d, ok := mb.expiry(); ok {
			next = min(next, d)
		}
	}
	return next
}

// expiry is when the member's session ends (Kafka's MemberMetadata.shouldKeepAlive): a member
// waiting in a rebalance is kept alive, except a new member, which gets
// NewMemberJoinTimeoutMs; otherwise its last heartbeat plus session.timeout.ms.
func (mb *member) expiry() (int64, bool) {
	switch {
	case mb.awaitingJoin && mb.isNew:
		return mb.lastHeartbeat + NewMemberJoinTimeoutMs, true
	case mb.awaitingJoin, mb.awaitingSync:
		return 0, false
	}
	return mb.lastHeartbeat + int64(mb.sessionTimeoutMs), true
}

// Tick runs every timer due at now: expired sessions and pending members (removed), a
// delayed join whose time is up (completed, or extended during the initial delay), a sync
// phase whose time is up (members that did not sync removed, rebalance again), and the
// offsets.retention.check.interval.ms pass over the committed offsets (expireOffsets).
func (m *Machine) Tick(now int64) {
	defer func() {
		if m.nextExpiry > 0 && m.nextExpiry <= now {
			m.expireOffsets(now)
			m.nextExpiry = now + m.cfg.OffsetsRetentionCheckIntervalMs
		}
	}()
	for _, id := range slices.Sorted(mapsKeys(m.groups)) {
		g := m.groups[id]
		for pid, d := range g.pending {
			if d <= now {
				delete(g.pending, pid)
				m.tryCompleteJoin(now, g)
			}
		}
		for _, mid := range slices.Clone(g.order) {
			mb := g.members[mid]
			if mb == nil {
				continue
			}
			if d, ok := mb.expiry(); ok && d <= now {
				m.logf("group %s: member %s expired (session.timeout.ms %d)", g.id, mid, mb.sessionTimeoutMs)
				m.removeMember(now, g, mb, kerr.UnknownMemberID)
			}
		}
		switch g.state {
		case PreparingRebalance:
			if g.joinDeadline <= now {
				m.joinTimerFired(now, g)
			}
		case CompletingRebalance:
			if !g.storing && g.syncDeadline <= now {
				for _, mid := range slices.Sorted(mapsKeys(g.pendingSync)) {
					if mb := g.members[mid]; mb != nil {
						m.logf("group %s: member %s did not sync within the rebalance timeout", g.id, mid)
						g.dropMember(mid)
					}
				}
				g.pendingSync = map[string]bool{}
				m.prepareRebalance(now, g)
				m.tryCompleteJoin(now, g)
			}
		}
	}
}

func (m *Machine) logf(format string, args ...any) {
	if m.cfg.Logf != nil {
		m.cfg.Logf(format, args...)
	}
}

// Stats returns groupID's counters, or false when the group is not held here.
func (m *Machine) Stats(groupID string) (Stats, bool) {
	g := m.groups[groupID]
	if g == nil {
		return Stats{}, false
	}
	st := g.stats
	st.Generation, st.State, st.Members = g.generation, g.state, len(g.members)
	st.RebalanceMs = slices.Clone(st.RebalanceMs)
	return st, true
}
