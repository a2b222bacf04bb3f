package sim

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/txn"
)

// The group coordinator in the simulation: every broker incarnation runs a core/group
// Coordinator in Manual mode (driven from the work loop: Scan after leadership changes, Tick
// at its deadlines, Poll for the acks=all waits of its writes), on __consumer_offsets
// (offsetsPartitions partitions, 3 replicas, min.insync.replicas 2), which the simulator's
// fetchers replicate and its faults hit like any topic: the coordinator of a group moves with
// the leadership of its partition. Consumers talk to the coordinator the controller's
// metadata names, over the simulated network: a group of dynamic members, a group of static
// members (group.instance.id, restarted now and then, the old process sometimes going on) and
// a standalone client committing with generation -1. Members join (MEMBER_ID_REQUIRED first
// for dynamic ones), the leader computes the assignment (the topic's partitions, round robin),
// they sync, heartbeat, commit the partitions they own (also with the generation they had,
// while busy during a rebalance or in a request retried after one), fetch their committed
// offsets, leave and restart.
//
// Invariants, checked when an answer is produced and at the checks (every 25 steps and at the
// end, after the faults healed and __consumer_offsets converged):
//   - an acknowledged commit is never lost or rolled back: OffsetFetch from the current
//     coordinator (the broker the controller names, leading in that leader epoch and loaded
//     for it) returns, for each partition, at least the last acknowledged commit, and at
//     least every commit it returned before whose record was then below the HW (commit
//     values grow in append order); at the end, the coordinator of every group serves it;
//   - a commit is visible only once committed: OffsetFetch never returns a commit that the
//     same coordinator appended in its leadership while the record is above the HW (Kafka's
//     pending offset commits; what a load read past the HW may be served);
//   - stale generations are refused: a coordinator accepts no Heartbeat, OffsetCommit or
//     SyncGroup of a generation older than one its JoinGroup answers handed out for the
//     group since it loaded the group's partition, nor one from a static member's id that a
//     later process of the same group.instance.id replaced meanwhile;
//   - a generation has one assignment: no two members (static ones by group.instance.id) own
//     a partition in the same generation, and a member's assignment in a generation never
//     changes.
//
// Losses are excused as for records (a correlated failure, noteFailures): commits
// acknowledged before a failure that comes while a crashed broker has not caught up on
// __consumer_offsets. Crashes are injected while the topic is in sync, not necessarily
// __consumer_offsets: a crash while it is not excuses what was acknowledged so far.

const (
	offsetsPartitions = 2
	groupSessionMs    = 1500
	groupRebalanceMs  = 1500
	// groupRequestNs: a request without an answer for this long is given up (the
	// connection is considered lost).
	groupRequestNs = int64(10 * time.Second)
)

// GroupStats counts the group coordinator's work in a run.
type GroupStats struct {
	Joins, Generations, Syncs, Heartbeats         int
	CommitsAcked, CommitsFailed, Fetches, Leaves  int
	StaticRestarts, Zombies, MemberCrashes, Loads int
	// Excuses counts the times acknowledged commits stopped being checked (a failure while
	// a crashed broker catches up, or a crash while __consumer_offsets was not in sync).
	Excuses int
}

func (t *GroupStats) add(s GroupStats) {
	t.Joins += s.Joins
	t.Generations += s.Generations
	t.Syncs += s.Syncs
	t.Heartbeats += s.Heartbeats
	t.CommitsAcked += s.CommitsAcked
	t.CommitsFailed += s.CommitsFailed
	t.Fetches += s.Fetches
	t.Leaves += s.Leaves
	t.StaticRestarts += s.StaticRestarts
	t.Zombies += s.Zombies
	t.MemberCrashes += s.MemberCrashes
	t.Loads += s.Loads
	t.Excuses += s.Excuses
}

// groupSim is the simulator's group state: the coordinators, the members and the oracle.
type groupSim struct {
	cfg     group.Config
	created bool
	coords  map[int32]*coordRef
	members []*gmember
	ids     int
	reqs    int

	// nextValue numbers commits in the order the coordinators append them: a commit's
	// offset is its number, so later records of a partition carry larger offsets.
	nextValue int64
	// appends: where each commit was appended (by its value).
	appends map[int64]appendInfo
	// ackSeq numbers acknowledgements and observations; lossUpTo excuses those numbered up
	// to it (a correlated failure).
	ackSeq, lossUpTo int
	acked            map[string]map[group.TP]seen // last acknowledged commit
	observed         map[string]map[group.TP]seen // largest committed value OffsetFetch returned
	maxGen           map[gkey]int32               // highest generation handed out per coordinator term
	owners           map[genKey]map[int32]string  // partition -> owner in a generation
	assigned         map[genKey]map[string]string // owner -> assignment in a generation
	loaded           map[gterm]bool
	// instanceIDs lists the member ids a static member's processes got; fenced, the ids a
	// coordinator term replaced by a later process's (its JoinGroup answered): that term
	// must accept nothing from them.
	instanceIDs map[string][]string
	fenced      map[gkey]map[string]bool

	// Failure bookkeeping for the excuses (counters of Stats seen last, at step seenStep).
	seen                   failureCounts
	seenStep               int
	offsetsSynced, pending bool
}

type coordRef struct {
	c   *group.Coordinator
	b   *broker.Broker
	inc int
}

// gterm names a coordinator's hold of a __consumer_offsets partition: the broker
// incarnation and the leader epoch it loaded the partition for.
type gterm struct {
	node  int32
	inc   int
	p     int32
	epoch int32
}

type gkey struct {
	group string
	term  gterm
}

type genKey struct {
	group string
	gen   int32
}

type seen struct {
	value int64
	num   int
}

type appendInfo struct {
	term gterm
	off  int64
	num  int // the commit's number (ackSeq) at its append
}

type failureCounts struct {
	kills, crashes, pauses, ctrlCuts, diskFull, clusterRestarts int
}

func (s *Sim) groupsInit() *groupSim {
	gs := &groupSim{coords: map[int32]*coordRef{}, appends: map[int64]appendInfo{},
		acked: map[string]map[group.TP]seen{}, observed: map[string]map[group.TP]seen{},
		maxGen: map[gkey]int32{}, owners: map[genKey]map[int32]string{}, assigned: map[genKey]map[string]string{},
		loaded: map[gterm]bool{}, instanceIDs: map[string][]string{}, fenced: map[gkey]map[string]bool{}}
	cfg := group.DefaultConfig()
	cfg.Manual = true
	cfg.InitialRebalanceDelayMs = 50
	cfg.MinSessionTimeoutMs = 100
	cfg.OffsetsTopicNumPartitions = offsetsPartitions
	cfg.OffsetsTopicReplicationFactor = int16(min(3, s.o.Brokers))
	cfg.OffsetsTopicSegmentBytes = 16 * segmentBytes // a few segments: the topic keeps every commit
	cfg.OffsetsCommitTimeoutMs = timeoutNs / int64(time.Millisecond)
	cfg.NewMemberID = func(client string) string { gs.ids++; return client + "-" + strconv.Itoa(gs.ids) }
	cfg.Logf = func(f string, a ...any) { s.tracef(f, a...) }
	gs.cfg = cfg
	for i := range 3 {
		gs.members = append(gs.members, &gmember{group: "dyn", client: "dyn-" + strconv.Itoa(i)})
	}
	for i := range 2 {
		gs.members = append(gs.members, &gmember{group: "static", client: "static-" + strconv.Itoa(i), instance: "instance-" + strconv.Itoa(i)})
	}
	gs.members = append(gs.members, &gmember{group: "solo", client: "solo", standalone: true, state: memberStable, gen: -1})
	return gs
}

func (s *Sim) nowMs() int64 { return s.now / int64(time.Millisecond) }

// groupWork is the work loop's part for the groups: it creates __consumer_offsets (that takes
// the step's work: it reports true), keeps every running broker's coordinator current (a new
// one for a new incarnation; Scan, Tick, Poll) and, one step in two, moves one consumer on,
// besides the step's other work. While the faults heal (produce false) consumers keep their
// membership but do not commit, restart or leave.
func (s *Sim) groupWork(produce bool) bool {
	if s.groups == nil {
		s.groups = s.groupsInit()
	}
	gs := s.groups
	s.noteFailures()
	if !gs.created {
		configs := group.OffsetsTopicConfigs(gs.cfg, gs.cfg.OffsetsTopicReplicationFactor)
		if s.fsyncAll {
			// The run's power losses excuse nothing: the commits are fsynced too.
			configs[controller.ConfigFlushMessages] = "1"
		}
		parts, err := s.ctrl.CreateTopic(group.OffsetsTopic, offsetsPartitions, gs.cfg.OffsetsTopicReplicationFactor, configs)
		if err != nil {
			if !errors.Is(err, kerr.InvalidReplicationFactor) && !s.refused(err) { // (a broker is down: later)
				s.fail("creating %s: %v", group.OffsetsTopic, err)
			}
			return true
		}
		gs.created = true
		s.tracef("%s created: %d partitions", group.OffsetsTopic, len(parts))
		return true
	}
	for _, n := range s.nodes {
		if c := s.coordinator(n); c != nil {
			c.Scan()
			s.noteLoads(n, c)
			if c.NextDeadline() <= s.nowMs() {
				c.Tick()
			}
			c.Poll()
		}
	}
	if !produce && s.stats.Steps%200 == 199 {
		s.offsetsOperatorElections()
	}
	if s.rng.IntN(2) == 0 {
		s.memberStep(gs.members[s.rng.IntN(len(gs.members))], produce)
	}
	return false
}

// coordinator returns the coordinator of broker n's running incarnation, starting a new one
// for a new incarnation (the one of the previous incarnation is closed: its parked requests
// are answered NOT_COORDINATOR, as a dead broker's connections close); nil while n is down
// or paused.
func (s *Sim) coordinator(n *node) *group.Coordinator {
	gs := s.groups
	ref := gs.coords[n.id]
	if ref != nil && (ref.b != n.b || ref.inc != n.inc) {
		ref.c.Close()
		delete(gs.coords, n.id)
		ref = nil
	}
	if !n.up() || n.paused {
		return nil
	}
	if ref == nil {
		c := group.NewCoordinator(gs.cfg, n.b, s.ctrl, s.nowMs)
		c.Start()
		ref = &coordRef{c: c, b: n.b, inc: n.inc}
		gs.coords[n.id] = ref
	}
	return ref.c
}

// term is coordinator c's hold of partition p on broker n.
func (s *Sim) term(n *node, c *group.Coordinator, p int32) gterm {
	e, _ := c.LoadedEpoch(p)
	return gterm{node: n.id, inc: n.inc, p: p, epoch: e}
}

func (s *Sim) noteLoads(n *node, c *group.Coordinator) {
	for p := int32(0); p < offsetsPartitions; p++ {
		if e, ok := c.LoadedEpoch(p); ok {
			t := gterm{node: n.id, inc: n.inc, p: p, epoch: e}
			if !s.groups.loaded[t] {
				s.groups.loaded[t] = true
				s.stats.Groups.Loads++
			}
		}
	}
}

// offsetsInSync reports whether every broker runs and every __consumer_offsets partition has
// all its replicas in the ISR (converged: also with every replica at the leader's LEO and
// the leader's HW there).
func (s *Sim) offsetsInSync(converged bool) bool {
	return s.internalInSync(group.OffsetsTopic, offsetsPartitions, s.groups != nil && s.groups.created, converged)
}

// internalInSync is offsetsInSync for an internal topic t of parts partitions (created: it
// exists yet).
func (s *Sim) internalInSync(t string, parts int32, created, converged bool) bool {
	for _, n := range s.nodes {
		if !n.up() || n.paused || n.b.LogDirOffline() != nil {
			return false
		}
	}
	if !created {
		return true
	}
	for p := int32(0); p < parts; p++ {
		st, ok := s.ctrl.Partition(t, p)
		if !ok || st.Leader == controller.NoLeader || len(st.ISR) != len(st.Replicas) {
			return false
		}
		if !converged {
			continue
		}
		lr, ok := s.nodes[st.Leader].b.Replica(t, st.Partition)
		if !ok || !lr.IsLeader() || lr.HW() != lr.LEO() {
			return false
		}
		for _, id := range st.Replicas {
			if r, ok := s.nodes[id].b.Replica(t, st.Partition); !ok || r.LEO() != lr.LEO() {
				return false
			}
		}
	}
	return true
}

// noteFailures keeps the excuses, as the simulator's for records (failure): after a crash,
// until __consumer_offsets is in sync again, any further failure may lose what the crash
// lost, so the commits acknowledged (and the committed values observed) so far are no longer
// checked, nor the assignments of the generations so far (a group's metadata may be lost, and
// its generations handed out again); a crash while __consumer_offsets is not in sync excuses
// them at once (its only ISR member may be the broker that crashed).
func (s *Sim) noteFailures() {
	gs := s.groups
	st := &s.stats
	now := failureCounts{st.Kills, st.Crashes, st.Pauses, st.CtrlCuts, st.DiskFul, st.ClusterRestarts}
	if was := gs.seen; now != was {
		gs.seen = now
		crashed := now.crashes > was.crashes
		other := now.kills > was.kills || now.pauses > was.pauses || now.ctrlCuts > was.ctrlCuts ||
			now.diskFull > was.diskFull || now.clusterRestarts > was.clusterRestarts || now.crashes > was.crashes+1
		if crashed && (!gs.offsetsSynced || other || gs.pending) || gs.pending && other {
			if gs.lossUpTo != gs.ackSeq || len(gs.owners) > 0 {
				gs.lossUpTo = gs.ackSeq
				clear(gs.owners)
				clear(gs.assigned)
				s.stats.Groups.Excuses++
				s.tracef("groups: a failure while a crashed broker catches up on %s: the %d commits acknowledged or observed so far, and the assignments of the generations so far, are no longer checked", group.OffsetsTopic, gs.ackSeq)
			}
		}
		if crashed {
			gs.pending = true
		}
	}
	// Whether __consumer_offsets is in sync, once a step: before the step's fault, if any,
	// when the step's deliveries answer something (faults come after them).
	if gs.seenStep != st.Steps {
		gs.seenStep = st.Steps
		gs.offsetsSynced = s.offsetsInSync(false)
		if gs.pending && gs.offsetsSynced {
			gs.pending = false
		}
	}
}

// offsetsOperatorElections: a __consumer_offsets or __transaction_state partition left offline because every ISR
// member lost data (after an excused correlated failure) gets an unclean election, as an
// operator would do; without an excuse that is a bug.
func (s *Sim) offsetsOperatorElections() {
	for _, t := range []string{group.OffsetsTopic, txn.StateTopic} {
		parts, _ := s.ctrl.Partitions(t)
		for _, st := range parts {
			if st.Leader != controller.NoLeader {
				continue
			}
			dmg := s.ctrl.Damaged(t, st.Partition)
			if slices.ContainsFunc(st.ISR, func(id int32) bool { return !slices.Contains(dmg, id) }) {
				continue
			}
			if s.groups.lossUpTo == 0 && len(s.lossy) == 0 && len(s.excusedNums) == 0 && (s.txns == nil || !s.txns.loss.lost) {
				s.fail("%s-%d is offline: every ISR member %v is damaged %v, without a correlated failure", t, st.Partition, st.ISR, dmg)
				return
			}
			if _, err := s.ctrl.ElectLeader(t, st.Partition, true); err == nil {
				s.tracef("operator: unclean election of %s-%d", t, st.Partition)
			}
		}
	}
}

// checkAccepted fails the seed when coordinator c on n accepted a request of generation gen
// of m's group after handing out a later generation in the same hold of the partition.
// It also fails it when the coordinator accepted the request of a static member's member id
// that a later process of the same group.instance.id replaced in the same hold.
func (s *Sim) checkAccepted(n *node, c *group.Coordinator, p int32, m *gmember, what string, gen int32, memberID string) {
	t := s.term(n, c, p)
	k := gkey{m.group, t}
	if g := s.groups.maxGen[k]; g > gen {
		s.fail("groups: coordinator %d (leader epoch %d) accepted a %s of %s generation %d from %s after handing out generation %d",
			n.id, t.epoch, what, m.group, gen, m.client, g)
	}
	if s.groups.fenced[k][memberID] {
		s.fail("groups: coordinator %d (leader epoch %d) accepted a %s of %s from member %s (%s), which a later process of %s replaced",
			n.id, t.epoch, what, m.group, memberID, m.client, m.instance)
	}
}

// checkAssignment records the assignment a SyncGroup answer gives m in generation gen and
// fails the seed if another member owns one of its partitions in that generation, or m had
// another assignment in it.
func (s *Sim) checkAssignment(m *gmember, gen int32, a []byte) {
	gs := s.groups
	k := genKey{m.group, gen}
	owner := m.id
	if m.instance != "" {
		owner = m.instance
	}
	if gs.owners[k] == nil {
		gs.owners[k], gs.assigned[k] = map[int32]string{}, map[string]string{}
	}
	if prev, ok := gs.assigned[k][owner]; ok && prev != string(a) {
		s.fail("groups: %s generation %d gave %s the assignment %q, after %q", m.group, gen, owner, a, prev)
		return
	}
	gs.assigned[k][owner] = string(a)
	for _, p := range parseAssignment(a) {
		if o, ok := gs.owners[k][p]; ok && o != owner {
			s.fail("groups: %s generation %d assigns partition %d to %s and to %s", m.group, gen, p, o, owner)
			return
		}
		gs.owners[k][p] = owner
	}
}

// observe checks what OffsetFetch returned (offs) from coordinator c on n for groupID: no
// commit c appended in its own hold of the partition while above the HW; and, if c is the
// current coordinator, nothing older than the last acknowledged commit or than a committed
// value returned before.
func (s *Sim) observe(n *node, c *group.Coordinator, p int32, groupID string, offs map[group.TP]group.Committed) {
	gs := s.groups
	r, ok := n.b.Replica(group.OffsetsTopic, p)
	if !ok {
		return
	}
	hw, t := r.HW(), s.term(n, c, p)
	st, _ := s.ctrl.Partition(group.OffsetsTopic, p)
	current := st.Leader == n.id && st.LeaderEpoch == r.LeaderEpoch() && r.IsLeader() && t.epoch == r.LeaderEpoch()
	s.noteFailures()
	for _, tp := range slices.SortedFunc(maps.Keys(offs), func(a, b group.TP) int { return cmp.Compare(a.Partition, b.Partition) }) {
		v := offs[tp].Offset
		a, ok := gs.appends[v]
		if ok && a.term == t && a.off >= hw {
			s.fail("groups: OffsetFetch of %s on broker %d returned %s-%d offset %d, which this coordinator appended at %s-%d offset %d in its leadership (epoch %d) and is not committed yet (HW %d)",
				groupID, n.id, tp.Topic, tp.Partition, v, group.OffsetsTopic, p, a.off, t.epoch, hw)
			return
		}
		if ok && a.off < hw && current {
			obs := gs.observed[groupID]
			if obs == nil {
				obs = map[group.TP]seen{}
				gs.observed[groupID] = obs
			}
			if v > obs[tp].value && a.num > gs.lossUpTo {
				// (Seeing a commit a failure excused does not make its loss a bug.)
				gs.ackSeq++
				obs[tp] = seen{v, gs.ackSeq}
			}
		}
	}
	if !current {
		return
	}
	for _, c := range []struct {
		what string
		m    map[group.TP]seen
	}{{"the last acknowledged commit", gs.acked[groupID]}, {"a committed offset OffsetFetch returned before", gs.observed[groupID]}} {
		for _, tp := range slices.SortedFunc(maps.Keys(c.m), func(a, b group.TP) int { return cmp.Compare(a.Partition, b.Partition) }) {
			want := c.m[tp]
			if want.num <= gs.lossUpTo {
				continue
			}
			if got, ok := offs[tp]; !ok || got.Offset < want.value {
				s.fail("groups: OffsetFetch of %s on coordinator %d (leader epoch %d, HW %d, LEO %d) returned %s-%d offset %d (committed %v): %s was %d",
					groupID, n.id, t.epoch, hw, r.LEO(), tp.Topic, tp.Partition, got.Offset, ok, c.what, want.value)
				return
			}
		}
	}
}

// checkGroups checks the groups from checkDurability: every group's current coordinator, if
// it serves the group, returns at least what was acknowledged (observe). final: the faults
// healed; it first runs until __consumer_offsets converged and every coordinator loaded,
// then every group must be served.
func (s *Sim) checkGroups(final bool) {
	gs := s.groups
	if gs == nil || !gs.created || s.err != nil {
		return
	}
	if final {
		for i := 0; i < 4000 && s.err == nil && !s.offsetsInSync(true); i++ {
			s.step(false)
		}
		if s.err != nil {
			return
		}
		if !s.offsetsInSync(true) {
			s.fail("groups: %s did not converge after the faults healed", group.OffsetsTopic)
			return
		}
		for _, n := range s.nodes {
			if c := s.coordinator(n); c != nil {
				c.Scan()
			}
		}
		s.tracef("groups: %+v", s.stats.Groups)
	}
	for _, g := range []string{"dyn", "static", "solo"} {
		p := group.PartitionFor(g, offsetsPartitions)
		st, ok := s.ctrl.Partition(group.OffsetsTopic, p)
		if !ok || st.Leader == controller.NoLeader {
			continue
		}
		n := s.nodes[st.Leader]
		ref := gs.coords[n.id]
		if !n.up() || n.paused || ref == nil || ref.b != n.b {
			continue
		}
		offs, err := ref.c.Committed(g, nil)
		if err != nil {
			if final {
				s.fail("groups: the coordinator of %s (broker %d) does not serve it after the faults healed: %v", g, n.id, err)
			}
			continue
		}
		s.observe(n, ref.c, p, g, offs)
	}
}
