package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
)

// The consumers of the groups the simulator drives (groups.go): their requests over the
// simulated network, their answers, and what a consumer does next.

type memberState int8

const (
	memberJoining memberState = iota
	memberSyncing
	memberStable
	memberLeft
)

// gmember is one consumer of a group (or the standalone client).
type gmember struct {
	group, client, instance string
	standalone              bool
	inc                     int // process incarnation: answers to an earlier one are dropped
	id                      string
	gen                     int32
	state                   memberState
	leader, skip            bool
	members                 []group.JoinMember
	assignment              []int32
	// req is the request in flight (0: none), sent at sentAt; commit is the OffsetCommit in
	// flight, which a consumer sends besides (with the generation it has, during a
	// rebalance too, as a rebalance listener does).
	req, commit      int
	sentAt, commitAt int64
	// lagUntil: a consumer busy processing (virtual time, ns): told to rejoin, it goes on
	// committing its generation until then (a static one stays a member meanwhile, a
	// dynamic one is dropped after the rebalance timeout).
	lagUntil int64
	// rangeFirst: the process prefers "range" to "roundrobin" (a restart may change it,
	// and with it the protocol the group selects); protocol is the group's.
	rangeFirst bool
	protocol   string
	// synced is the last generation m synced in; stale, when set, an earlier one it
	// synced in, in which it sends one more commit (a request retried after a rebalance).
	synced, stale int32
	// zombie: the process a static member's restart left running (a paused VM, say): it
	// heartbeats and commits with its old member id until an answer fails, zombieLife
	// requests at most.
	zombie     bool
	zombieLife int
}

// memberStep moves consumer m on by one request, unless one is in flight.
func (s *Sim) memberStep(m *gmember, produce bool) {
	if m.zombie {
		if m.req == 0 && m.commit == 0 {
			if m.zombieLife--; m.zombieLife < 0 || !produce {
				s.dropZombie(m)
			} else if s.rng.IntN(2) == 0 {
				s.sendCommit(m, m.gen)
			} else {
				s.sendHeartbeat(m)
			}
		}
		return
	}
	if m.commit != 0 && s.now-m.commitAt >= groupRequestNs {
		m.commit = 0
	}
	if produce && m.commit == 0 && (m.standalone || m.gen > 0 && len(m.assignment) > 0) && s.rng.IntN(2) == 0 {
		gen := m.gen
		if m.stale != 0 {
			gen, m.stale = m.stale, 0
		}
		s.sendCommit(m, gen)
		return
	}
	if m.req != 0 {
		if s.now-m.sentAt < groupRequestNs {
			return
		}
		s.tracef("groups: %s gives up its request %d", m.client, m.req)
		m.req = 0
	}
	if m.standalone {
		s.sendOffsetFetch(m)
		return
	}
	switch m.state {
	case memberLeft:
		if s.rng.IntN(4) == 0 {
			m.state, m.id = memberJoining, ""
		}
	case memberJoining:
		s.sendJoin(m)
	case memberSyncing:
		s.sendSync(m)
	case memberStable:
		if m.lagUntil != 0 {
			if s.now >= m.lagUntil || !produce {
				m.lagUntil, m.state = 0, memberJoining
			}
			return
		}
		r := s.rng.IntN(100)
		switch {
		case r < 60 || !produce && r < 90:
			s.sendHeartbeat(m)
		case !produce || r < 85:
			s.sendOffsetFetch(m)
		case r < 89:
			s.sendLeave(m)
		case r < 96:
			s.restartMember(m)
		default:
			s.sendHeartbeat(m)
		}
	}
}

// restartMember is a consumer process that dies and starts again: a static one rejoins with
// its group.instance.id and no member id (taking its old place, KIP-345); a dynamic one
// joins as a new member (the old one expires after its session timeout).
func (s *Sim) restartMember(m *gmember) {
	if m.instance != "" && m.id != "" && m.gen > 0 && s.rng.IntN(2) == 0 {
		z := &gmember{group: m.group, client: m.client + "-zombie", instance: m.instance, id: m.id, gen: m.gen,
			state: memberStable, assignment: m.assignment, zombie: true, zombieLife: 1 + s.rng.IntN(4)}
		s.groups.members = append(s.groups.members, z)
		s.stats.Groups.Zombies++
		s.tracef("groups: %s restarts; the old process (%s, generation %d) goes on", m.client, m.id, m.gen)
	}
	m.inc++
	m.req, m.commit, m.id, m.gen, m.state, m.assignment, m.lagUntil = 0, 0, "", 0, memberJoining, nil, 0
	m.synced, m.stale = 0, 0
	if s.rng.IntN(3) == 0 {
		m.rangeFirst = !m.rangeFirst
	}
	if m.instance != "" {
		s.stats.Groups.StaticRestarts++
	} else {
		s.stats.Groups.MemberCrashes++
	}
	s.tracef("groups: %s restarts", m.client)
}

// groupSend carries a request of m to the coordinator the controller names for m's group: exec
// runs on that broker (with its coordinator, rescanned three times in four: a watcher may lag)
// and hands its answer to reply, which carries it back to m (dropped if m gave the request
// up or restarted meanwhile). A broker that is down or restarted answers NOT_COORDINATOR.
// An OffsetCommit goes in m's commit slot, anything else in its request slot.
func (s *Sim) groupSend(m *gmember, what string, exec func(n *node, c *group.Coordinator, p int32, reply func(func())), answer func(error)) {
	p := group.PartitionFor(m.group, offsetsPartitions)
	st, ok := s.ctrl.Partition(group.OffsetsTopic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	gs := s.groups
	gs.reqs++
	id, inc := gs.reqs, m.inc
	slot, at := &m.req, &m.sentAt
	if what == "OffsetCommit" {
		slot, at = &m.commit, &m.commitAt
	}
	*slot, *at = id, s.now
	n := s.nodes[st.Leader]
	ninc := n.inc
	const client = -1
	reply := func(fn func()) {
		s.at(s.now+s.delay(n.id, client), func() {
			if *slot != id || m.inc != inc {
				return
			}
			*slot = 0
			fn()
		})
	}
	failed := func() {
		reply(func() { answer(fmt.Errorf("%s to broker %d: connection lost: %w", what, n.id, kerr.NotCoordinator)) })
	}
	s.at(s.now+s.delay(client, n.id), func() {
		s.deliver(n, ninc, func() {
			c := s.coordinator(n)
			if c == nil {
				failed()
				return
			}
			if s.rng.IntN(4) != 0 {
				c.Scan()
			}
			exec(n, c, p, reply)
		}, failed)
	})
}

// coordinatorError reports whether err sends a client to look for the coordinator again.
func coordinatorError(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.RequestTimedOut)
}

func (s *Sim) sendJoin(m *gmember) {
	req := group.JoinRequest{Group: m.group, MemberID: m.id, InstanceID: m.instance, ClientID: m.client, ClientHost: "/sim",
		ProtocolType: "consumer", SessionTimeoutMs: groupSessionMs, RebalanceTimeoutMs: groupRebalanceMs,
		Protocols: []group.Protocol{{Name: "roundrobin", Metadata: []byte(m.group)}, {Name: "range", Metadata: []byte(m.group)}}, RequireKnownMemberID: true,
		SupportsSkipAssignment: s.rng.IntN(2) == 0}
	if m.rangeFirst {
		req.Protocols[0], req.Protocols[1] = req.Protocols[1], req.Protocols[0]
	}
	s.stats.Groups.Joins++
	s.groupSend(m, "JoinGroup", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		c.JoinAsync(req, func(r group.JoinResult) {
			if r.Err == nil {
				gs := s.groups
				k := gkey{m.group, s.term(n, c, p)}
				if r.Generation > gs.maxGen[k] {
					gs.maxGen[k] = r.Generation
					s.stats.Groups.Generations++
				}
				if m.instance != "" {
					ids := gs.instanceIDs[m.instance]
					for _, old := range ids {
						if old != r.MemberID {
							if gs.fenced[k] == nil {
								gs.fenced[k] = map[string]bool{}
							}
							gs.fenced[k][old] = true
						}
					}
					if !slices.Contains(ids, r.MemberID) {
						gs.instanceIDs[m.instance] = append(ids, r.MemberID)
					}
				}
			}
			reply(func() { s.joinAnswered(m, r) })
		})
	}, func(err error) { s.joinAnswered(m, group.JoinResult{Err: err}) })
}

func (s *Sim) joinAnswered(m *gmember, r group.JoinResult) {
	switch {
	case r.Err == nil:
		m.id, m.gen, m.members, m.protocol = r.MemberID, r.Generation, r.Members, r.Protocol
		m.leader, m.skip = r.Leader == r.MemberID, r.SkipAssignment
		m.state = memberSyncing
		s.tracef("groups: %s joined %s generation %d as %s (leader %s, skip assignment %v)", m.client, m.group, r.Generation, r.MemberID, r.Leader, r.SkipAssignment)
	case errors.Is(r.Err, kerr.MemberIDRequired):
		m.id = r.MemberID
	case errors.Is(r.Err, kerr.UnknownMemberID), errors.Is(r.Err, kerr.FencedInstanceID):
		m.id = ""
	}
}

// assign is the leader's assignor: the topic's partitions round robin over the members in
// member id order.
func (s *Sim) assign(members []group.JoinMember) map[string][]byte {
	ids := make([]string, len(members))
	for i, jm := range members {
		ids[i] = jm.MemberID
	}
	slices.Sort(ids)
	parts := map[string][]string{}
	for p := range s.nparts {
		id := ids[p%len(ids)]
		parts[id] = append(parts[id], strconv.Itoa(p))
	}
	out := map[string][]byte{}
	for _, id := range ids {
		out[id] = []byte(strings.Join(parts[id], ","))
	}
	return out
}

func parseAssignment(b []byte) []int32 {
	var out []int32
	for _, f := range strings.Split(string(b), ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, int32(n))
		}
	}
	return out
}

func (s *Sim) sendSync(m *gmember) {
	req := group.SyncRequest{Group: m.group, Generation: m.gen, MemberID: m.id, InstanceID: m.instance, ProtocolType: "consumer", Protocol: m.protocol}
	if m.leader && !m.skip && len(m.members) > 0 {
		req.Assignments = s.assign(m.members)
	}
	s.stats.Groups.Syncs++
	s.groupSend(m, "SyncGroup", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		c.SyncAsync(req, func(r group.SyncResult) {
			if r.Err == nil {
				s.checkAccepted(n, c, p, m, "SyncGroup", req.Generation, req.MemberID)
				s.checkAssignment(m, req.Generation, r.Assignment)
			}
			reply(func() { s.syncAnswered(m, r) })
		})
	}, func(err error) { s.syncAnswered(m, group.SyncResult{Err: err}) })
}

func (s *Sim) syncAnswered(m *gmember, r group.SyncResult) {
	switch {
	case r.Err == nil:
		m.assignment, m.state = parseAssignment(r.Assignment), memberStable
		if m.synced > 0 && m.synced < m.gen && s.rng.IntN(2) == 0 {
			m.stale = m.synced
		}
		m.synced = m.gen
		s.tracef("groups: %s synced %s generation %d: partitions %v", m.client, m.group, m.gen, m.assignment)
	case errors.Is(r.Err, kerr.UnknownMemberID), errors.Is(r.Err, kerr.FencedInstanceID):
		m.id, m.state = "", memberJoining
	default:
		m.state = memberJoining
	}
}

func (s *Sim) sendHeartbeat(m *gmember) {
	s.stats.Groups.Heartbeats++
	gen, id := m.gen, m.id
	s.groupSend(m, "Heartbeat", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		err := c.Heartbeat(m.group, id, m.instance, gen)
		if err == nil {
			s.checkAccepted(n, c, p, m, "Heartbeat", gen, id)
		}
		reply(func() { s.memberError(m, err) })
	}, func(err error) { s.memberError(m, err) })
}

func (s *Sim) dropZombie(m *gmember) {
	s.groups.members = slices.DeleteFunc(s.groups.members, func(o *gmember) bool { return o == m })
	s.tracef("groups: %s stops", m.client)
}

// memberError handles the error of a Heartbeat or OffsetCommit as a consumer does: rejoin on a
// rebalance or a stale generation, as a new member when unknown or fenced. A zombie stops at
// its first error.
func (s *Sim) memberError(m *gmember, err error) {
	if m.zombie && err != nil {
		s.dropZombie(m)
		return
	}
	switch {
	case err == nil, coordinatorError(err), m.standalone:
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
		m.id, m.state, m.lagUntil = "", memberJoining, 0
	case m.lagUntil != 0: // busy: it rejoins when done
	case errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration):
		if s.rng.IntN(2) == 0 {
			m.lagUntil = s.now + int64(s.rng.IntN(3000))*int64(time.Millisecond)
			s.tracef("groups: %s is busy until %.3fs: it rejoins then", m.client, float64(m.lagUntil-startNs)/1e9)
			return
		}
		m.state = memberJoining
	}
}

func (s *Sim) sendLeave(m *gmember) {
	s.stats.Groups.Leaves++
	lm := group.LeaveMember{MemberID: m.id, InstanceID: m.instance}
	s.groupSend(m, "LeaveGroup", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		c.Leave(m.group, []group.LeaveMember{lm})
		reply(func() {})
	}, func(error) {})
	m.state, m.id, m.assignment = memberLeft, "", nil
}

// sendCommit commits m's partitions (the standalone client: one or two at random) with
// generation gen. Each partition's offset is a number taken when the coordinator appends the
// commit, larger than any appended before.
func (s *Sim) sendCommit(m *gmember, gen int32) {
	tps := m.assignment
	if m.standalone {
		tps = []int32{int32(s.rng.IntN(s.nparts))}
		if q := int32(s.rng.IntN(s.nparts)); q != tps[0] {
			tps = append(tps, q)
		}
	}
	if len(tps) == 0 {
		return
	}
	req := group.CommitRequest{Group: m.group, Generation: gen, MemberID: m.id, InstanceID: m.instance}
	if m.standalone {
		req = group.CommitRequest{Group: m.group, Generation: -1}
	}
	s.groupSend(m, "OffsetCommit", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		gs := s.groups
		offs := map[group.TP]group.Committed{}
		var keys []group.TP
		for _, q := range tps {
			gs.nextValue++
			tp := group.TP{Topic: topic, Partition: q}
			offs[tp] = group.Committed{Offset: gs.nextValue, LeaderEpoch: -1, CommitTimestamp: s.nowMs()}
			keys = append(keys, tp)
		}
		slices.SortFunc(keys, func(a, b group.TP) int { return cmp.Compare(a.Partition, b.Partition) })
		var leo int64 = -1
		r, ok := n.b.Replica(group.OffsetsTopic, p)
		if ok {
			leo = r.LEO()
		}
		term := s.term(n, c, p)
		genSeen := gs.maxGen[gkey{m.group, term}]
		fenced := gs.fenced[gkey{m.group, term}][req.MemberID]
		// Numbered when it is appended, not when its answer arrives: a failure meanwhile
		// excuses it as it does the commits the client knows of (a leader may yet count a
		// fetch a crashed broker sent before its crash, and acknowledge it).
		s.noteFailures()
		gs.ackSeq++
		num := gs.ackSeq
		c.CommitAsync(req, offs, func(err error) {
			switch {
			case err == nil && req.Generation >= 0 && genSeen > req.Generation:
				s.fail("groups: coordinator %d (leader epoch %d) accepted an OffsetCommit of %s generation %d from %s after handing out generation %d",
					n.id, term.epoch, m.group, req.Generation, m.client, genSeen)
			case err == nil && fenced:
				s.fail("groups: coordinator %d (leader epoch %d) accepted an OffsetCommit of %s from member %s (%s), which a later process of %s replaced",
					n.id, term.epoch, m.group, req.MemberID, m.client, m.instance)
			}
			reply(func() { s.commitAnswered(m, offs, num, err) })
		})
		if ok && r.LEO() == leo+int64(len(keys)) {
			for i, tp := range keys {
				gs.appends[offs[tp].Offset] = appendInfo{term: term, off: leo + int64(i), num: num}
			}
		}
	}, func(err error) { s.commitAnswered(m, nil, 0, err) })
}

// commitAnswered handles a commit's answer; num is the number its append got (ackSeq).
func (s *Sim) commitAnswered(m *gmember, offs map[group.TP]group.Committed, num int, err error) {
	gs := s.groups
	if err != nil {
		s.stats.Groups.CommitsFailed++
		s.tracef("groups: %s commit failed: %v", m.client, err)
		if m.state == memberStable {
			s.memberError(m, err)
		}
		return
	}
	s.noteFailures()
	s.stats.Groups.CommitsAcked++
	acked := gs.acked[m.group]
	if acked == nil {
		acked = map[group.TP]seen{}
		gs.acked[m.group] = acked
	}
	for tp, c := range offs {
		if c.Offset > acked[tp].value {
			acked[tp] = seen{c.Offset, num}
		}
	}
	s.tracef("groups: %s committed %s generation %d: %v", m.client, m.group, m.gen, offsetsString(offs))
}

func offsetsString(offs map[group.TP]group.Committed) string {
	var b strings.Builder
	for _, tp := range slices.SortedFunc(maps.Keys(offs), func(a, b group.TP) int { return cmp.Compare(a.Partition, b.Partition) }) {
		fmt.Fprintf(&b, " p%d=%d", tp.Partition, offs[tp].Offset)
	}
	return b.String()
}

func (s *Sim) sendOffsetFetch(m *gmember) {
	s.stats.Groups.Fetches++
	s.groupSend(m, "OffsetFetch", func(n *node, c *group.Coordinator, p int32, reply func(func())) {
		offs, err := c.Committed(m.group, nil)
		if err == nil {
			s.observe(n, c, p, m.group, offs)
		}
		reply(func() { s.memberError(m, err) })
	}, func(err error) { s.memberError(m, err) })
}
