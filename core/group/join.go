package group

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Join handles a JoinGroup (Kafka's GroupCoordinator.handleJoinGroup). It returns the answer
// at once (parked false) or parks the request under ticket t (parked true): the answer then
// comes from Drain when the rebalance completes, the member is fenced, or the partition is
// unloaded.
func (m *Machine) Join(now int64, req JoinRequest, t Ticket) (JoinResult, bool) {
	if err := m.check(req.Group); err != nil {
		return JoinResult{Err: err, MemberID: req.MemberID}, false
	}
	if req.SessionTimeoutMs < m.cfg.MinSessionTimeoutMs || req.SessionTimeoutMs > m.cfg.MaxSessionTimeoutMs {
		return JoinResult{Err: fmt.Errorf("session.timeout.ms %d is outside [group.min.session.timeout.ms %d, group.max.session.timeout.ms %d]: %w",
			req.SessionTimeoutMs, m.cfg.MinSessionTimeoutMs, m.cfg.MaxSessionTimeoutMs, kerr.InvalidSessionTimeout), MemberID: req.MemberID}, false
	}
	if req.RebalanceTimeoutMs <= 0 {
		req.RebalanceTimeoutMs = req.SessionTimeoutMs
	}
	g := m.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return JoinResult{Err: kerr.UnknownMemberID, MemberID: req.MemberID}, false
		}
		g = newGroup(req.Group, m.Partition(req.Group))
		m.groups[req.Group] = g
	}
	if g.state == Dead {
		return JoinResult{Err: kerr.CoordinatorNotAvailable, MemberID: req.MemberID}, false
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return JoinResult{Err: kerr.InconsistentGroupProtocol, MemberID: req.MemberID}, false
	}
	if req.MemberID == "" {
		return m.joinNew(now, g, req, t)
	}
	return m.joinKnown(now, g, req, t)
}

func (m *Machine) joinNew(now int64, g *group, req JoinRequest, t Ticket) (JoinResult, bool) {
	id := m.cfg.NewMemberID(req.ClientID)
	if req.InstanceID != "" {
		if old, ok := g.static[req.InstanceID]; ok {
			return m.replaceStatic(now, g, old, id, req, t)
		}
	}
	if len(g.members)+len(g.pending) >= m.cfg.MaxSize {
		return JoinResult{Err: fmt.Errorf("group %s has group.max.size %d members: %w", g.id, m.cfg.MaxSize, kerr.GroupMaxSizeReached), MemberID: req.MemberID}, false
	}
	if req.InstanceID == "" && req.RequireKnownMemberID {
		g.pending[id] = now + int64(req.SessionTimeoutMs)
		return JoinResult{Err: kerr.MemberIDRequired, MemberID: id, Generation: -1}, false
	}
	m.addMemberAndRebalance(now, g, id, req, t)
	return JoinResult{}, true
}

func (m *Machine) joinKnown(now int64, g *group, req JoinRequest, t Ticket) (JoinResult, bool) {
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		m.addMemberAndRebalance(now, g, req.MemberID, req, t)
		return JoinResult{}, true
	}
	mb, err := g.validateMember(req.MemberID, req.InstanceID)
	if err != nil {
		return JoinResult{Err: err, MemberID: req.MemberID}, false
	}
	switch g.state {
	case PreparingRebalance:
		m.updateMemberAndRebalance(now, g, mb, req, t)
		return JoinResult{}, true
	case CompletingRebalance:
		if mb.sameProtocols(req.Protocols) {
			// A retried JoinGroup whose answer was lost: answer it again.
			return g.joinResult(mb), false
		}
		m.updateMemberAndRebalance(now, g, mb, req, t)
		return JoinResult{}, true
	case Stable:
		if g.leader == mb.id || !mb.sameProtocols(req.Protocols) {
			m.updateMemberAndRebalance(now, g, mb, req, t)
			return JoinResult{}, true
		}
		mb.lastHeartbeat = now
		return g.joinResult(mb), false
	}
	return JoinResult{Err: kerr.UnknownMemberID, MemberID: req.MemberID}, false
}

// validateMember is Kafka's validateCurrentMember: FENCED_INSTANCE_ID when a static member's
// instance id now maps to another member id, UNKNOWN_MEMBER_ID for an unknown member.
func (g *group) validateMember(memberID, instanceID string) (*member, error) {
	if instanceID != "" {
		if cur, ok := g.static[instanceID]; ok && cur != memberID {
			return nil, fmt.Errorf("group.instance.id %q belongs to member %s, not %s: %w", instanceID, cur, memberID, kerr.FencedInstanceID)
		}
	}
	mb := g.members[memberID]
	if mb == nil {
		return nil, kerr.UnknownMemberID
	}
	if instanceID != "" && mb.instanceID != instanceID {
		return nil, fmt.Errorf("member %s is not group.instance.id %q: %w", memberID, instanceID, kerr.FencedInstanceID)
	}
	return mb, nil
}

// joinResult is the answer of the current generation for mb (the leader gets the members).
func (g *group) joinResult(mb *member) JoinResult {
	r := JoinResult{MemberID: mb.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	if mb.id == g.leader {
		for _, id := range g.order {
			o := g.members[id]
			r.Members = append(r.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

func newMember(id string, req JoinRequest, now int64) *member {
	return &member{
		id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost,
		protocolType: req.ProtocolType, protocols: slices.Clone(req.Protocols),
		sessionTimeoutMs: req.SessionTimeoutMs, rebalanceTimeoutMs: req.RebalanceTimeoutMs,
		lastHeartbeat: now, isNew: true,
	}
}

func (m *Machine) addMemberAndRebalance(now int64, g *group, id string, req JoinRequest, t Ticket) {
	mb := newMember(id, req, now)
	mb.awaitingJoin, mb.joinTicket = true, t
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true // the first rebalance of a new group waits for more
	}
	g.addMember(mb)
	m.maybePrepareRebalance(now, g)
	m.tryCompleteJoin(now, g)
}

func (m *Machine) updateMemberAndRebalance(now int64, g *group, mb *member, req JoinRequest, t Ticket) {
	mb.protocols = slices.Clone(req.Protocols)
	mb.sessionTimeoutMs, mb.rebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
	mb.clientID, mb.clientHost = req.ClientID, req.ClientHost
	if mb.awaitingJoin && mb.joinTicket != 0 && mb.joinTicket != t {
		// The member joined again on another connection: the older request is superseded.
		m.replyJoin(mb, JoinResult{Err: kerr.UnknownMemberID, MemberID: mb.id})
	}
	mb.awaitingJoin, mb.joinTicket = true, t
	mb.lastHeartbeat = now
	m.maybePrepareRebalance(now, g)
	m.tryCompleteJoin(now, g)
}

// replaceStatic gives a known static member (old) its new member id, as Kafka's
// updateStaticMemberAndRebalance (KIP-345): the old id is fenced (its parked requests get
// FENCED_INSTANCE_ID), the leadership follows the member, and the member's protocols and
// timeouts become the request's. Then:
//   - Stable, and the protocol the group would select is still its protocol (whatever the
//     metadata): no rebalance. The group metadata with the new member id is stored first;
//     the JoinGroup is answered from Stored with the current generation (the leader with
//     JoinGroup v9+ learns that it leads, with the members and SkipAssignment; before v9
//     every member is told the leader id from before the replacement, so a restarted
//     leader syncs as a follower), or, if the store fails, the replacement is undone.
//   - Stable with another protocol to select, or CompletingRebalance (the leader may be
//     computing an assignment for the old member id): a rebalance.
//   - PreparingRebalance: the member takes part in the rebalance under its new id.
func (m *Machine) replaceStatic(now int64, g *group, old, id string, req JoinRequest, t Ticket) (JoinResult, bool) {
	currentLeader := g.leader
	prev := g.members[old]
	if prev.awaitingJoin {
		m.replyJoin(prev, JoinResult{Err: kerr.FencedInstanceID, MemberID: old})
	}
	if prev.awaitingSync {
		m.replySync(prev, SyncResult{Err: kerr.FencedInstanceID})
		prev.awaitingSync = false
	}
	mb := g.renameMember(old, id)
	undo := staticRejoin{member: id, old: old, ticket: t, leader: currentLeader, skip: req.SupportsSkipAssignment,
		protocols: mb.protocols, sessionTimeoutMs: mb.sessionTimeoutMs, rebalanceTimeoutMs: mb.rebalanceTimeoutMs}
	mb.protocols = slices.Clone(req.Protocols)
	mb.sessionTimeoutMs, mb.rebalanceTimeoutMs = req.SessionTimeoutMs, req.RebalanceTimeoutMs
	mb.awaitingJoin, mb.joinTicket = true, t
	mb.lastHeartbeat = now
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			s := g.store(now)
			s.static = &undo
			m.stores = append(m.stores, s)
			return JoinResult{}, true
		}
		m.prepareRebalance(now, g)
	case CompletingRebalance:
		m.prepareRebalance(now, g)
	}
	m.tryCompleteJoin(now, g)
	return JoinResult{}, true
}

// staticRejoin is what Stored needs to answer, or undo, the replacement of a static member's
// id in a Stable group.
type staticRejoin struct {
	member, old        string // the new and the replaced member id
	ticket             Ticket // the new member's JoinGroup
	leader             string // the leader id before the replacement
	skip               bool   // JoinGroup v9+
	protocols          []Protocol
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
}

// Stored applies the outcome of a group metadata write from DrainStores (err: why it
// failed, as the SyncGroup / JoinGroup error). Only a static member's replacement in a Stable
// group awaits it: on success its JoinGroup is answered, if still parked; on failure, if it
// is still parked, the replacement is undone (the old member id is the member again, as
// Kafka reverts it) and the JoinGroup fails with err; once the new id was handed out (a
// rebalance completed with it), the replacement stands. Other writes need nothing (a failure is the driver's to log).
func (m *Machine) Stored(now int64, s *GroupStore, err error) {
	st := s.static
	if st == nil {
		return
	}
	g := m.groups[s.Group]
	if g == nil || g.state == Dead {
		return
	}
	mb := g.members[st.member]
	if mb == nil {
		return
	}
	if err != nil {
		if g.static[mb.instanceID] != st.member || !mb.awaitingJoin || mb.joinTicket != st.ticket {
			// Another JoinGroup of the member, or a rebalance that completed meanwhile,
			// answered it with the new member id: that generation's own group metadata
			// write records it, and the old process stays fenced.
			return
		}
		mb.protocols, mb.sessionTimeoutMs, mb.rebalanceTimeoutMs = st.protocols, st.sessionTimeoutMs, st.rebalanceTimeoutMs
		m.replyJoin(mb, JoinResult{Err: err, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: st.leader})
		mb.awaitingJoin = false
		g.renameMember(st.member, st.old)
		mb.lastHeartbeat = now
		return
	}
	if st.ticket == 0 || mb.joinTicket != st.ticket {
		return // answered meanwhile (a rebalance completed with it)
	}
	r := JoinResult{MemberID: mb.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: st.leader}
	if st.skip {
		r = g.joinResult(mb)
		r.SkipAssignment = mb.id == g.leader
	}
	m.replyJoin(mb, r)
	mb.awaitingJoin = false
	mb.lastHeartbeat = now
}

// maybePrepareRebalance starts a rebalance from Empty, Stable or CompletingRebalance.
func (m *Machine) maybePrepareRebalance(now int64, g *group) {
	switch g.state {
	case Empty, Stable, CompletingRebalance:
		m.prepareRebalance(now, g)
	}
}

// prepareRebalance moves g to PreparingRebalance (Kafka's prepareRebalance): parked SyncGroups
// get REBALANCE_IN_PROGRESS; from Empty the join waits group.initial.rebalance.delay.ms
// (InitialDelayedJoin), otherwise up to the largest rebalance timeout (DelayedJoin).
func (m *Machine) prepareRebalance(now int64, g *group) {
	if g.state == CompletingRebalance {
		for _, id := range g.order {
			mb := g.members[id]
			if mb.awaitingSync {
				m.replySync(mb, SyncResult{Err: kerr.RebalanceInProgress})
				mb.awaitingSync = false
			}
		}
		g.pendingSync = map[string]bool{}
		g.storing = false
	}
	if g.state == Empty {
		delay := m.cfg.InitialRebalanceDelayMs
		g.initialDelay = true
		g.remaining = max(g.maxRebalanceTimeout()-delay, 0)
		g.joinDeadline = now + delay
		g.newMemberAdded = false
	} else {
		g.initialDelay = false
		g.joinDeadline = now + g.maxRebalanceTimeout()
	}
	if g.rebalanceStart == 0 {
		g.rebalanceStart = now
	}
	g.transition(PreparingRebalance, now)
}

// allJoined is Kafka's hasAllMembersJoined: every member waits in JoinGroup and no member id
// handed out with MEMBER_ID_REQUIRED is still to come.
func (g *group) allJoined() bool {
	for _, mb := range g.members {
		if !mb.awaitingJoin {
			return false
		}
	}
	return len(g.pending) == 0
}

// tryCompleteJoin completes a DelayedJoin early once everyone has joined (never during the
// initial delay, as Kafka's InitialDelayedJoin).
func (m *Machine) tryCompleteJoin(now int64, g *group) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		m.completeJoin(now, g)
	}
}

func (m *Machine) joinTimerFired(now int64, g *group) {
	if g.initialDelay && g.newMemberAdded && g.remaining > 0 {
		delay := min(m.cfg.InitialRebalanceDelayMs, g.remaining)
		g.remaining = max(g.remaining-delay, 0)
		g.joinDeadline = now + delay
		g.newMemberAdded = false
		return
	}
	m.completeJoin(now, g)
}

// completeJoin is Kafka's onCompleteJoin: dynamic members that did not rejoin are removed
// (static ones stay with their last subscription), a leader is chosen among those that
// joined, the generation advances, and every waiting member gets its JoinGroup answer (the
// leader with every member's metadata). With no member left the group becomes Empty.
func (m *Machine) completeJoin(now int64, g *group) {
	for _, id := range slices.Clone(g.order) {
		mb := g.members[id]
		if !mb.awaitingJoin && mb.instanceID == "" {
			g.dropMember(id)
		}
	}
	joined := false
	for _, id := range g.order {
		if g.members[id].awaitingJoin {
			joined = true
			break
		}
	}
	if len(g.members) > 0 && !joined {
		// Only static members that did not rejoin: wait another rebalance timeout.
		g.initialDelay = false
		g.joinDeadline = now + g.maxRebalanceTimeout()
		return
	}
	if l := g.members[g.leader]; l == nil || !l.awaitingJoin {
		g.leader = ""
		for _, id := range g.order {
			if g.members[id].awaitingJoin {
				g.leader = id
				break
			}
		}
	}
	g.generation++
	g.initialDelay = false
	if len(g.members) == 0 {
		g.transition(Empty, now)
		g.protocol, g.leader = "", "" // the protocol type stays, as in Kafka
		m.rebalanceDone(now, g)
		m.stores = append(m.stores, g.store(now))
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(CompletingRebalance, now)
	g.syncDeadline = now + g.maxRebalanceTimeout()
	g.pendingSync = map[string]bool{}
	for _, id := range g.order {
		mb := g.members[id]
		mb.assignment = nil
		if !mb.awaitingJoin {
			continue // a static member that has not come back yet
		}
		g.pendingSync[id] = true
		m.replyJoin(mb, g.joinResult(mb))
		mb.awaitingJoin, mb.isNew = false, false
		mb.lastHeartbeat = now
	}
}

func (m *Machine) rebalanceDone(now int64, g *group) {
	if g.rebalanceStart == 0 {
		return
	}
	g.stats.Rebalances++
	g.stats.RebalanceMs = append(g.stats.RebalanceMs, float64(now-g.rebalanceStart))
	if n := len(g.stats.RebalanceMs); n > maxStatsDurations {
		g.stats.RebalanceMs = slices.Delete(g.stats.RebalanceMs, 0, n-maxStatsDurations)
	}
	g.rebalanceStart = 0
}

// Sync handles a SyncGroup (Kafka's handleSyncGroup). In CompletingRebalance every request
// parks under t; the leader's request also returns the group metadata record to write
// (store != nil): the driver appends it to __consumer_offsets and calls SyncStored, which
// answers every parked member with its assignment. In Stable the assignment is answered at
// once.
func (m *Machine) Sync(now int64, req SyncRequest, t Ticket) (res SyncResult, parked bool, store *GroupStore) {
	if err := m.check(req.Group); err != nil {
		return SyncResult{Err: err}, false, nil
	}
	g := m.groups[req.Group]
	if g == nil {
		return SyncResult{Err: kerr.UnknownMemberID}, false, nil
	}
	if g.state == Dead {
		return SyncResult{Err: kerr.CoordinatorNotAvailable}, false, nil
	}
	mb, err := g.validateMember(req.MemberID, req.InstanceID)
	if err != nil {
		return SyncResult{Err: err}, false, nil
	}
	if req.Generation != g.generation {
		return SyncResult{Err: kerr.IllegalGeneration}, false, nil
	}
	if (req.ProtocolType != "" && req.ProtocolType != g.protocolType) || (req.Protocol != "" && req.Protocol != g.protocol) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol}, false, nil
	}
	switch g.state {
	case Empty:
		return SyncResult{Err: kerr.UnknownMemberID}, false, nil
	case PreparingRebalance:
		return SyncResult{Err: kerr.RebalanceInProgress}, false, nil
	case Stable:
		mb.lastHeartbeat = now
		return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: mb.assignment}, false, nil
	}
	// CompletingRebalance
	if mb.awaitingSync && mb.syncTicket != 0 && mb.syncTicket != t {
		m.replySync(mb, SyncResult{Err: kerr.RebalanceInProgress})
	}
	mb.awaitingSync, mb.syncTicket = true, t
	delete(g.pendingSync, mb.id)
	if mb.id != g.leader || g.storing {
		return SyncResult{}, true, nil
	}
	g.storing = true
	s := g.store(now)
	for i := range s.Stored.Members {
		s.Stored.Members[i].Assignment = req.Assignments[s.Stored.Members[i].MemberID]
	}
	return SyncResult{}, true, &s
}

// store is the group metadata record of g's current generation, members and assignments.
func (g *group) store(now int64) GroupStore {
	ts := g.stateTimestamp
	if ts < 0 {
		ts = now
	}
	sg := StoredGroup{ProtocolType: g.protocolType, Generation: g.generation, Protocol: g.protocol, Leader: g.leader, StateTimestampMs: ts}
	for _, id := range g.order {
		o := g.members[id]
		sg.Members = append(sg.Members, StoredMember{
			MemberID: o.id, InstanceID: o.instanceID, ClientID: o.clientID, ClientHost: o.clientHost,
			RebalanceTimeout: o.rebalanceTimeoutMs, SessionTimeout: o.sessionTimeoutMs,
			Subscription: o.metadataFor(g.protocol), Assignment: o.assignment,
		})
	}
	return GroupStore{Group: g.id, Partition: g.partition, Generation: g.generation, Stored: sg}
}

// GroupStore is a write to __consumer_offsets partition Partition: a group metadata record
// (the leader's assignment, before the rebalance of Generation may complete: Sync, then
// SyncStored; or a write from DrainStores, then Stored), or the tombstones of expired
// offsets (Records).
type GroupStore struct {
	Group      string
	Partition  int32
	Generation int32
	Stored     StoredGroup
	static     *staticRejoin // a static member's replacement waits for this write
	tombstones []Record      // set: written instead of the group metadata
}

// Record returns the group metadata record's key and value.
func (s *GroupStore) Record() Record {
	return Record{Key: GroupKey(s.Group), Value: GroupValue(s.Stored)}
}

// SyncStored applies the outcome of a GroupStore write. On success, if the group is still in
// that generation's CompletingRebalance, every member gets its assignment (members the leader
// left out get an empty one) and the group becomes Stable. A failed write answers the parked
// members with err and rebalances again.
func (m *Machine) SyncStored(now int64, s *GroupStore, err error) {
	g := m.groups[s.Group]
	if g == nil || g.state != CompletingRebalance || g.generation != s.Generation || !g.storing {
		return
	}
	g.storing = false
	if err != nil {
		for _, id := range g.order {
			mb := g.members[id]
			if mb.awaitingSync {
				m.replySync(mb, SyncResult{Err: err})
				mb.awaitingSync = false
			}
		}
		m.prepareRebalance(now, g)
		m.tryCompleteJoin(now, g)
		return
	}
	byID := map[string][]byte{}
	for _, sm := range s.Stored.Members {
		byID[sm.MemberID] = sm.Assignment
	}
	g.transition(Stable, now)
	g.pendingSync = map[string]bool{}
	for _, id := range g.order {
		mb := g.members[id]
		mb.assignment = byID[id]
		if mb.assignment == nil {
			mb.assignment = []byte{}
		}
		if mb.awaitingSync {
			m.replySync(mb, SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: mb.assignment})
			mb.awaitingSync = false
		}
		mb.lastHeartbeat = now
	}
	m.rebalanceDone(now, g)
}

// removeMember takes mb out of g (left or expired; Kafka's removeMemberAndUpdateGroup): its
// parked requests get err, and the group rebalances (or completes a pending join).
func (m *Machine) removeMember(now int64, g *group, mb *member, err error) {
	if mb.awaitingJoin {
		m.replyJoin(mb, JoinResult{Err: err, MemberID: mb.id})
	}
	if mb.awaitingSync {
		m.replySync(mb, SyncResult{Err: err})
	}
	g.dropMember(mb.id)
	switch g.state {
	case Stable, CompletingRebalance:
		m.prepareRebalance(now, g)
		m.tryCompleteJoin(now, g)
	case PreparingRebalance:
		m.tryCompleteJoin(now, g)
	}
}

// Records returns the records to write: the tombstones of expired offsets (and of the
// expired group), or the group metadata record.
func (s *GroupStore) Records() []Record {
	if s.tombstones != nil {
		return s.tombstones
	}
	return []Record{s.Record()}
}
