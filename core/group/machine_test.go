package group

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// env drives a Machine with a fake clock and collects the answers to parked requests.
type env struct {
	t       *testing.T
	m       *Machine
	now     int64
	next    Ticket
	answers map[Ticket]Reply
	ids     int
}

func newEnv(t *testing.T, delayMs int64) *env {
	e := &env{t: t, answers: map[Ticket]Reply{}, now: 1000}
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelayMs = delayMs
	cfg.OffsetsTopicNumPartitions = 1
	cfg.NewMemberID = func(client string) string { e.ids++; return client + "-" + strconv.Itoa(e.ids) }
	e.m = NewMachine(cfg)
	e.m.BeginLoad(0)
	e.m.FinishLoad(e.now, 0, nil)
	return e
}

func (e *env) drain() {
	for _, r := range e.m.Drain() {
		if _, dup := e.answers[r.Ticket]; dup {
			e.t.Fatalf("ticket %d answered twice", r.Ticket)
		}
		e.answers[r.Ticket] = r
	}
}

// advance moves the clock by ms, running every timer that falls due on the way in order.
func (e *env) advance(ms int64) {
	end := e.now + ms
	for {
		d := e.m.NextDeadline()
		if d > end {
			break
		}
		e.now = max(e.now, d)
		e.m.Tick(e.now)
		e.drain()
	}
	e.now = end
	e.m.Tick(e.now)
	e.drain()
}

func joinReq(member, instance string) JoinRequest {
	return JoinRequest{Group: "g", MemberID: member, InstanceID: instance, ClientID: "c", ProtocolType: "consumer",
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, RequireKnownMemberID: true,
		Protocols: []Protocol{{Name: "range", Metadata: []byte("sub-" + instance)}}}
}

// join sends a JoinGroup; it returns the immediate answer or the ticket of the parked request.
func (e *env) join(req JoinRequest) (JoinResult, Ticket) {
	e.next++
	t := e.next
	res, parked := e.m.Join(e.now, req, t)
	e.drain()
	if parked {
		return JoinResult{}, t
	}
	return res, 0
}

func (e *env) answer(t Ticket) (Reply, bool) {
	r, ok := e.answers[t]
	return r, ok
}

func (e *env) joined(t Ticket) JoinResult {
	e.t.Helper()
	r, ok := e.answers[t]
	if !ok || r.Join == nil {
		e.t.Fatalf("JoinGroup ticket %d not answered (state %v)", t, e.state())
	}
	return *r.Join
}

func (e *env) state() State {
	if g := e.m.groups["g"]; g != nil {
		return g.state
	}
	return Dead
}

func (e *env) sync(member string, gen int32, assign map[string][]byte) Ticket {
	e.t.Helper()
	e.next++
	t := e.next
	res, parked, store := e.m.Sync(e.now, SyncRequest{Group: "g", Generation: gen, MemberID: member, Assignments: assign}, t)
	if store != nil {
		e.m.SyncStored(e.now, store, nil)
	}
	e.drain()
	if !parked {
		e.answers[t] = Reply{Ticket: t, Sync: &res}
	}
	return t
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if (want == nil) != (got == nil) || (want != nil && !errors.Is(got, want)) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

// twoMembers runs the classic start of a group: two new members get their ids with
// MEMBER_ID_REQUIRED, join, wait out the initial delay, the leader syncs the assignment.
func twoMembers(t *testing.T, e *env) (a, b string, gen int32) {
	t.Helper()
	r, _ := e.join(joinReq("", ""))
	wantErr(t, "first JoinGroup v4", r.Err, kerr.MemberIDRequired)
	a = r.MemberID
	r, _ = e.join(joinReq("", ""))
	b = r.MemberID
	_, ta := e.join(joinReq(a, ""))
	_, tb := e.join(joinReq(b, ""))
	if ta == 0 || tb == 0 {
		t.Fatal("JoinGroup with the member id did not park")
	}
	if e.state() != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", e.state())
	}
	// The second member joined during the initial delay: it is extended once (Kafka's
	// InitialDelayedJoin), so the join completes after twice group.initial.rebalance.delay.ms.
	delay := e.m.cfg.InitialRebalanceDelayMs
	e.advance(2*delay - 1)
	if _, ok := e.answer(ta); ok && delay > 0 {
		t.Fatal("join completed before the extended group.initial.rebalance.delay.ms")
	}
	e.advance(1)
	ja, jb := e.joined(ta), e.joined(tb)
	if ja.Generation != 1 || jb.Generation != 1 || ja.Leader != a || jb.Leader != a || ja.Protocol != "range" {
		t.Fatalf("join answers %+v / %+v: want generation 1, leader %s, protocol range", ja, jb, a)
	}
	if len(ja.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d: want 2 and 0", len(ja.Members), len(jb.Members))
	}
	tb2 := e.sync(b, 1, nil)
	if _, ok := e.answer(tb2); ok {
		t.Fatal("follower's SyncGroup answered before the leader's")
	}
	ta2 := e.sync(a, 1, map[string][]byte{a: []byte("A"), b: []byte("B")})
	for tk, want := range map[Ticket]string{ta2: "A", tb2: "B"} {
		r, ok := e.answer(tk)
		if !ok || r.Sync.Err != nil || string(r.Sync.Assignment) != want {
			t.Fatalf("SyncGroup answer %+v (answered %v), want assignment %q", r.Sync, ok, want)
		}
	}
	if e.state() != Stable {
		t.Fatalf("state %v after sync, want Stable", e.state())
	}
	return a, b, 1
}

func TestJoinSyncStable(t *testing.T) {
	e := newEnv(t, 3000)
	a, b, gen := twoMembers(t, e)
	wantErr(t, "heartbeat", e.m.Heartbeat(e.now, "g", a, "", gen), nil)
	wantErr(t, "heartbeat old generation", e.m.Heartbeat(e.now, "g", b, "", gen-1), kerr.IllegalGeneration)
	wantErr(t, "heartbeat unknown member", e.m.Heartbeat(e.now, "g", "nobody", "", gen), kerr.UnknownMemberID)
	wantErr(t, "commit", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: gen, MemberID: a}), nil)
	wantErr(t, "commit old generation", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: 0, MemberID: a}), kerr.IllegalGeneration)
	wantErr(t, "commit of a non-member with generation -1", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: -1}), kerr.UnknownMemberID)
	// A follower rejoining with the same protocols in Stable gets the current generation.
	r, tk := e.join(joinReq(b, ""))
	if tk != 0 || r.Generation != gen || r.Err != nil {
		t.Fatalf("follower rejoin in Stable: %+v parked=%v, want generation %d at once", r, tk != 0, gen)
	}
	st, _ := e.m.Stats("g")
	if st.Rebalances != 1 || st.RebalanceMs[0] != 6000 {
		t.Fatalf("stats %+v: want 1 rebalance of 6000 ms", st)
	}
}

func TestLeaveRebalancesAtOnce(t *testing.T) {
	e := newEnv(t, 3000)
	a, b, gen := twoMembers(t, e)
	top, per := e.m.Leave(e.now, "g", []LeaveMember{{MemberID: a}})
	wantErr(t, "leave", top, nil)
	wantErr(t, "leave member", per[0], nil)
	if e.state() != PreparingRebalance {
		t.Fatalf("state %v after the leader left, want PreparingRebalance", e.state())
	}
	wantErr(t, "heartbeat during rebalance", e.m.Heartbeat(e.now, "g", b, "", gen), kerr.RebalanceInProgress)
	wantErr(t, "commit during PreparingRebalance", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: gen, MemberID: b}), nil)
	_, tb := e.join(joinReq(b, ""))
	// Everyone has rejoined: no delay (not from Empty).
	jb := e.joined(tb)
	if jb.Generation != gen+1 || jb.Leader != b || len(jb.Members) != 1 {
		t.Fatalf("rejoin: %+v, want generation %d led by %s", jb, gen+1, b)
	}
	wantErr(t, "commit in CompletingRebalance", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: gen + 1, MemberID: b}), kerr.RebalanceInProgress)
	e.sync(b, gen+1, map[string][]byte{b: []byte("all")})
	if e.state() != Stable {
		t.Fatalf("state %v, want Stable", e.state())
	}
	top, per = e.m.Leave(e.now, "g", []LeaveMember{{MemberID: b}, {MemberID: a}})
	wantErr(t, "leave last", per[0], nil)
	wantErr(t, "leave again", per[1], kerr.UnknownMemberID)
	if e.state() != Empty || e.m.groups["g"].generation != gen+2 {
		t.Fatalf("state %v generation %d after the last member left, want Empty %d", e.state(), e.m.groups["g"].generation, gen+2)
	}
	if stores := e.m.DrainStores(); len(stores) != 1 || len(stores[0].Stored.Members) != 0 {
		t.Fatalf("background stores %+v: want the Empty group's metadata", stores)
	}
	wantErr(t, "commit generation -1 to an Empty group", e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: -1}), nil)
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	e := newEnv(t, 0)
	a, b, gen := twoMembers(t, e)
	for i := 0; i < 4; i++ { // a heartbeats every 3 s, b never
		e.advance(3000)
		if err := e.m.Heartbeat(e.now, "g", a, "", gen); err != nil {
			if !errors.Is(err, kerr.RebalanceInProgress) {
				t.Fatalf("heartbeat: %v", err)
			}
			break
		}
	}
	if e.m.groups["g"].members[b] != nil || e.state() != PreparingRebalance {
		t.Fatalf("member %s still in the group (state %v) after its session timeout", b, e.state())
	}
	_, ta := e.join(joinReq(a, ""))
	if r := e.joined(ta); r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", r)
	}
}

func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	e := newEnv(t, 0)
	a, b, gen := twoMembers(t, e)
	// a changes its subscription: rebalance; b keeps heartbeating but never rejoins.
	req := joinReq(a, "")
	req.Protocols[0].Metadata = []byte("new")
	_, ta := e.join(req)
	for i := 0; i < 10; i++ {
		e.advance(3000)
		_ = e.m.Heartbeat(e.now, "g", b, "", gen)
	}
	r := e.joined(ta)
	if r.Generation != gen+1 || len(r.Members) != 1 || e.m.groups["g"].members[b] != nil {
		t.Fatalf("after the rebalance timeout: %+v, b present %v", r, e.m.groups["g"].members[b] != nil)
	}
}

func TestSyncTimeoutRebalances(t *testing.T) {
	e := newEnv(t, 0)
	r, _ := e.join(joinReq("", ""))
	_, ta := e.join(joinReq(r.MemberID, ""))
	e.advance(0)
	if e.joined(ta).Generation != 1 || e.state() != CompletingRebalance {
		t.Fatalf("state %v, want CompletingRebalance", e.state())
	}
	e.advance(30000) // rebalance.timeout.ms without the leader's SyncGroup
	if e.m.groups["g"].members[r.MemberID] != nil {
		t.Fatal("member that never synced is still in the group")
	}
	if e.state() != Empty {
		t.Fatalf("state %v, want Empty", e.state())
	}
}

func TestInitialDelayExtendsWhileMembersJoin(t *testing.T) {
	e := newEnv(t, 3000)
	var tickets []Ticket
	for i := 0; i < 3; i++ {
		r, _ := e.join(joinReq("", ""))
		_, tk := e.join(joinReq(r.MemberID, ""))
		tickets = append(tickets, tk)
		e.advance(2000) // a new member every 2 s: the delay is extended each time
	}
	if _, ok := e.answer(tickets[0]); ok {
		t.Fatal("join completed while new members kept joining")
	}
	e.advance(4000)
	for _, tk := range tickets {
		if r := e.joined(tk); len(r.Members) != 0 && len(r.Members) != 3 {
			t.Fatalf("join answer %+v", r)
		}
	}
}

// stores completes every group metadata write the Machine asked for with err, as the driver
// does once the write is acknowledged (or failed).
func (e *env) stores(err error) {
	for _, s := range e.m.DrainStores() {
		e.m.Stored(e.now, &s, err)
	}
	e.drain()
}

// staticPair starts a group of two static members, ia (the leader) and ib, with
// assignments A and B in generation 1.
func staticPair(t *testing.T, e *env) (a, b string) {
	t.Helper()
	ra, ta := e.join(joinReq("", "ia"))
	if ra.Err != nil || ta == 0 {
		t.Fatalf("static join: %+v (static members get no MEMBER_ID_REQUIRED)", ra)
	}
	_, tb := e.join(joinReq("", "ib"))
	e.advance(0)
	a, b = e.joined(ta).MemberID, e.joined(tb).MemberID
	if e.joined(ta).Leader != a {
		t.Fatalf("leader %s, want %s", e.joined(ta).Leader, a)
	}
	e.sync(a, 1, map[string][]byte{a: []byte("A"), b: []byte("B")})
	e.sync(b, 1, nil)
	e.stores(nil)
	return a, b
}

// rejoinStatic is the JoinGroup of a restarted static member (no member id): it parks until
// the group metadata with its new member id is stored, as Kafka's
// updateStaticMemberAndRebalance answers from storeGroup's callback.
func (e *env) rejoinStatic(req JoinRequest) Ticket {
	e.t.Helper()
	r, tk := e.join(req)
	if tk == 0 {
		e.t.Fatalf("static rejoin answered before its member id was stored: %+v", r)
	}
	return tk
}

func TestStaticMemberReplacedWithoutRebalance(t *testing.T) {
	e := newEnv(t, 0)
	_, b := staticPair(t, e)
	// b restarts: a JoinGroup with its instance id and no member id.
	tk := e.rejoinStatic(joinReq("", "ib"))
	e.stores(nil)
	r := e.joined(tk)
	if r.Err != nil || r.Generation != 1 || r.MemberID == b || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("static follower rejoin in Stable: %+v: want generation 1 with a new member id", r)
	}
	wantErr(t, "old member id fenced", e.m.Heartbeat(e.now, "g", b, "ib", 1), kerr.FencedInstanceID)
	tk = e.sync(r.MemberID, 1, nil)
	if got, _ := e.answer(tk); string(got.Sync.Assignment) != "B" {
		t.Fatalf("replaced static member's assignment %q, want B", got.Sync.Assignment)
	}
	if e.state() != Stable {
		t.Fatalf("state %v, want Stable (no rebalance)", e.state())
	}
	// The static leader leaving by instance id (LeaveGroup v3+) rebalances.
	_, per := e.m.Leave(e.now, "g", []LeaveMember{{InstanceID: "ia"}})
	wantErr(t, "leave by instance id", per[0], nil)
	if e.state() != PreparingRebalance {
		t.Fatalf("state %v, want PreparingRebalance", e.state())
	}
}

// TestStaticLeaderRejoinKeepsGroupStable: the static group leader restarts and rejoins with
// its group.instance.id and unchanged metadata. As Kafka (KIP-345,
// updateStaticMemberAndRebalance) the group stays Stable in its generation: the new member
// id replaces the old one (fenced), it leads, and it gets its old assignment back. With
// JoinGroup v9+ (KIP-814) it learns that it leads, with the members, and SkipAssignment
// (the assignors are not idempotent: it must not compute a new assignment the Stable group
// would ignore); before v9 it is told the old leader id, so it syncs as a follower.
func TestStaticLeaderRejoinKeepsGroupStable(t *testing.T) {
	for _, skip := range []bool{true, false} {
		t.Run(fmt.Sprintf("skipAssignment=%v", skip), func(t *testing.T) {
			e := newEnv(t, 0)
			a, b := staticPair(t, e)
			req := joinReq("", "ia")
			req.SupportsSkipAssignment = skip
			tk := e.rejoinStatic(req)
			if e.state() != Stable {
				t.Fatalf("state %v after the static leader rejoined, want Stable", e.state())
			}
			e.stores(nil)
			r := e.joined(tk)
			if r.Err != nil || r.Generation != 1 || r.MemberID == a || r.MemberID == "" {
				t.Fatalf("static leader rejoin: %+v: want generation 1 with a new member id", r)
			}
			switch {
			case skip && (r.Leader != r.MemberID || !r.SkipAssignment || len(r.Members) != 2):
				t.Fatalf("JoinGroup v9 answer %+v: want leader = itself, SkipAssignment, both members", r)
			case !skip && (r.Leader != a || r.SkipAssignment || len(r.Members) != 0):
				t.Fatalf("JoinGroup v8 answer %+v: want the old leader id %s, no members", r, a)
			}
			wantErr(t, "old leader id fenced", e.m.Heartbeat(e.now, "g", a, "ia", 1), kerr.FencedInstanceID)
			wantErr(t, "the other member's heartbeat", e.m.Heartbeat(e.now, "g", b, "ib", 1), nil)
			tk = e.sync(r.MemberID, 1, nil)
			if got, _ := e.answer(tk); got.Sync.Err != nil || string(got.Sync.Assignment) != "A" {
				t.Fatalf("restarted leader's SyncGroup %+v, want its assignment A", got.Sync)
			}
			if st, _ := e.m.Stats("g"); st.State != Stable || st.Rebalances != 1 || st.Generation != 1 {
				t.Fatalf("stats %+v: want Stable generation 1 after its only rebalance", st)
			}
		})
	}
}

// TestStaticRejoinProtocolRules: a restarted static member whose new metadata leaves the
// group's selected protocol unchanged keeps the group Stable (Kafka compares the protocol
// the group would select, not the metadata); one that changes the selected protocol
// rebalances; in CompletingRebalance any static rejoin rebalances.
func TestStaticRejoinProtocolRules(t *testing.T) {
	e := newEnv(t, 0)
	staticPair(t, e)
	req := joinReq("", "ia")
	req.Protocols[0].Metadata = []byte("a new subscription")
	tk := e.rejoinStatic(req)
	e.stores(nil)
	if r := e.joined(tk); r.Err != nil || r.Generation != 1 || e.state() != Stable {
		t.Fatalf("static rejoin with new metadata: %+v, state %v: want generation 1, Stable", r, e.state())
	}

	e = newEnv(t, 0)
	both := func(instance string, first, second string) JoinRequest {
		r := joinReq("", instance)
		r.Protocols = []Protocol{{Name: first}, {Name: second}}
		return r
	}
	_, ta := e.join(both("ia", "range", "roundrobin"))
	_, tb := e.join(both("ib", "range", "roundrobin"))
	e.advance(0)
	a, b := e.joined(ta).MemberID, e.joined(tb).MemberID
	e.sync(a, 1, map[string][]byte{a: []byte("A"), b: []byte("B")})
	e.stores(nil)
	if e.m.groups["g"].protocol != "range" {
		t.Fatalf("protocol %q, want range", e.m.groups["g"].protocol)
	}
	e.rejoinStatic(both("ia", "roundrobin", "range"))
	if e.state() != PreparingRebalance {
		t.Fatalf("static rejoin that changes the selected protocol: state %v, want PreparingRebalance", e.state())
	}
}

// TestStaticRejoinStoreFails: when the group metadata with the new member id cannot be
// written, Kafka reverts the replacement: the old member id is the member again and the
// JoinGroup fails with the store's error and no member id.
func TestStaticRejoinStoreFails(t *testing.T) {
	e := newEnv(t, 0)
	_, b := staticPair(t, e)
	tk := e.rejoinStatic(joinReq("", "ib"))
	e.stores(kerr.CoordinatorNotAvailable)
	r := e.joined(tk)
	if !errors.Is(r.Err, kerr.CoordinatorNotAvailable) || r.MemberID != "" {
		t.Fatalf("static rejoin whose store failed: %+v: want COORDINATOR_NOT_AVAILABLE and no member id", r)
	}
	wantErr(t, "the old member id after the revert", e.m.Heartbeat(e.now, "g", b, "ib", 1), nil)
	if e.state() != Stable {
		t.Fatalf("state %v, want Stable", e.state())
	}
}

// TestStaticRejoinStoreFailsAfterRebalance: a restarted static member's new id is handed out
// by a rebalance that completes while its group metadata write is pending; the write then
// fails. The replacement stands (the rebalance answered the new process with the new id):
// undoing it would make the old process a member again beside the new one.
func TestStaticRejoinStoreFailsAfterRebalance(t *testing.T) {
	e := newEnv(t, 0)
	a, b := staticPair(t, e)
	tk := e.rejoinStatic(joinReq("", "ib"))
	pending := e.m.DrainStores() // the replacement's write, not answered yet
	// A new member joins: a rebalance, which the restarted member takes part in.
	r, _ := e.join(joinReq("", ""))
	_, tn := e.join(joinReq(r.MemberID, ""))
	_, ta := e.join(joinReq(a, "ia"))
	e.advance(0)
	got := e.joined(tk)
	if got.Err != nil || got.MemberID == "" || got.MemberID == b || got.Generation != 2 {
		t.Fatalf("restarted static member's answer from the rebalance: %+v: want generation 2 with a new member id", got)
	}
	if e.joined(tn).Generation != 2 || e.joined(ta).Generation != 2 {
		t.Fatalf("rebalance answers %+v, %+v: want generation 2", e.joined(tn), e.joined(ta))
	}
	for i := range pending {
		e.m.Stored(e.now, &pending[i], kerr.NotEnoughReplicasAfterAppend)
	}
	e.drain()
	wantErr(t, "the old process's heartbeat", e.m.Heartbeat(e.now, "g", b, "ib", 2), kerr.FencedInstanceID)
	if err := e.m.Heartbeat(e.now, "g", got.MemberID, "ib", 2); err != nil && !errors.Is(err, kerr.RebalanceInProgress) {
		t.Fatalf("the new process's heartbeat: %v, want it a member", err)
	}
}

func TestUnloadAnswersNotCoordinator(t *testing.T) {
	e := newEnv(t, 3000)
	r, _ := e.join(joinReq("", ""))
	_, tk := e.join(joinReq(r.MemberID, ""))
	e.m.Unload(0)
	e.drain()
	if got := e.joined(tk); !errors.Is(got.Err, kerr.NotCoordinator) {
		t.Fatalf("parked join after unload: %v, want NOT_COORDINATOR", got.Err)
	}
	res, _ := e.join(joinReq("", ""))
	wantErr(t, "join after unload", res.Err, kerr.NotCoordinator)
	e.m.BeginLoad(0)
	res, _ = e.join(joinReq("", ""))
	wantErr(t, "join while loading", res.Err, kerr.CoordinatorLoadInProgress)
}

func TestLoadRestoresStableGroup(t *testing.T) {
	e := newEnv(t, 0)
	a, b, gen := twoMembers(t, e)
	// What the leader's SyncGroup wrote, replayed as a new coordinator would.
	g := e.m.groups["g"]
	l := NewLoaded()
	st := g.store(e.now)
	tp := TP{"t", 3}
	l.apply(0, GroupKey("g"), GroupValue(st.Stored))
	l.apply(1, OffsetKey("g", tp), OffsetValue(Committed{Offset: 42, LeaderEpoch: 7, Metadata: "m"}))
	l.apply(2, OffsetKey("g", TP{"t", 4}), OffsetValue(Committed{Offset: 1}))
	l.apply(3, OffsetKey("g", TP{"t", 4}), nil) // tombstone
	m2 := NewMachine(e.m.cfg)
	m2.BeginLoad(0)
	m2.FinishLoad(e.now, 0, l)
	wantErr(t, "heartbeat on the new coordinator", m2.Heartbeat(e.now, "g", b, "", gen), nil)
	if d, _ := m2.Describe("g"); d.State != Stable || len(d.Members) != 2 || string(d.Members[0].Assignment) != "" && d.Members[0].MemberID != a {
		t.Fatalf("loaded group %+v", d)
	}
	offs, _ := m2.Committed("g", nil)
	if len(offs) != 1 || offs[tp].Offset != 42 || offs[tp].LeaderEpoch != 7 || offs[tp].Metadata != "m" {
		t.Fatalf("loaded offsets %+v", offs)
	}
}

func TestCommitStoredKeepsLaterRecord(t *testing.T) {
	e := newEnv(t, 0)
	if err := e.m.CheckCommit(e.now, CommitRequest{Group: "g", Generation: -1}); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	e.m.CommitStored("g", map[TP]Committed{tp: {Offset: 20}}, 100, nil)
	e.m.CommitStored("g", map[TP]Committed{tp: {Offset: 10}}, 50, nil) // an earlier write completing late
	offs, _ := e.m.Committed("g", []TP{tp})
	if offs[tp].Offset != 20 {
		t.Fatalf("committed %d, want 20 (the later record)", offs[tp].Offset)
	}
	if _, _, err := e.m.Delete("g"); err != nil {
		t.Fatalf("delete Empty group: %v", err)
	}
	if _, _, err := e.m.Delete("g"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete again: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

func TestDeleteNonEmptyGroup(t *testing.T) {
	e := newEnv(t, 0)
	twoMembers(t, e)
	if _, _, err := e.m.Delete("g"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete Stable group: %v, want NON_EMPTY_GROUP", err)
	}
}

func TestJoinValidation(t *testing.T) {
	e := newEnv(t, 0)
	req := joinReq("", "")
	req.SessionTimeoutMs = 10
	r, _ := e.join(req)
	wantErr(t, "session timeout too small", r.Err, kerr.InvalidSessionTimeout)
	req = joinReq("", "")
	req.Group = ""
	r, _ = e.join(req)
	wantErr(t, "empty group id", r.Err, kerr.InvalidGroupID)
	r, _ = e.join(joinReq("who", ""))
	wantErr(t, "unknown member of unknown group", r.Err, kerr.UnknownMemberID)
	twoMembers(t, e)
	req = joinReq("", "")
	req.Protocols = []Protocol{{Name: "roundrobin"}}
	r, _ = e.join(req)
	wantErr(t, "protocol nobody supports", r.Err, kerr.InconsistentGroupProtocol)
}

func TestPartitionForMatchesKafka(t *testing.T) {
	for _, c := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"foo", 50, 24},                  // "foo".hashCode() = 101574
		{"polygenelubricants", 50, 0},    // hashCode() = Integer.MIN_VALUE: Utils.abs -> 0
		{"", 50, 0},                      // hashCode() = 0
		{"console-consumer-1", 1, 0},     // one partition
		{"Aa", 7, int32(2112 % 7)},       // "Aa".hashCode() = 2112
		{"\U0001F600", 50, 1772899 % 50}, // a surrogate pair: 31*0xD83D + 0xDE00
	} {
		if got := PartitionFor(c.group, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	tp := TP{"topic", 9}
	d, err := DecodeRecord(OffsetKey("g", tp), OffsetValue(Committed{Offset: 5, LeaderEpoch: 2, Metadata: "x", CommitTimestamp: 77}))
	if err != nil || !d.IsOffset || d.Group != "g" || d.TP != tp || d.Offset.Offset != 5 || d.Offset.LeaderEpoch != 2 || d.Offset.Metadata != "x" || d.Offset.CommitTimestamp != 77 {
		t.Fatalf("offset record: %+v, %v", d, err)
	}
	sg := StoredGroup{ProtocolType: "consumer", Generation: 3, Protocol: "range", Leader: "m1", StateTimestampMs: 9,
		Members: []StoredMember{{MemberID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/127.0.0.1", RebalanceTimeout: 1, SessionTimeout: 2, Subscription: []byte{1}, Assignment: []byte{2}}}}
	d, err = DecodeRecord(GroupKey("g"), GroupValue(sg))
	if err != nil || d.IsOffset || fmt.Sprint(d.Stored) != fmt.Sprint(sg) {
		t.Fatalf("group record: %+v, %v", d.Stored, err)
	}
	if d, err := DecodeRecord(GroupKey("g"), nil); err != nil || !d.Tombstone {
		t.Fatalf("tombstone: %+v %v", d, err)
	}
	for _, bad := range [][2][]byte{{{0, 9}, nil}, {{0, 2, 0}, nil}, {OffsetKey("g", tp), {0, 3, 1}}} {
		if _, err := DecodeRecord(bad[0], bad[1]); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("DecodeRecord(%x, %x): %v, want CORRUPT_MESSAGE", bad[0], bad[1], err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(OffsetKey("g", TP{"t", 1}), OffsetValue(Committed{Offset: 1}))
	f.Add(GroupKey("g"), GroupValue(StoredGroup{Members: []StoredMember{{MemberID: "m"}}}))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		var k, v []byte
		if d.IsOffset {
			k, v = OffsetKey(d.Group, d.TP), OffsetValue(d.Offset)
		} else {
			k, v = GroupKey(d.Group), GroupValue(d.Stored)
		}
		if d.Tombstone {
			v = nil
		}
		d2, err := DecodeRecord(k, v)
		if err != nil || d2.Group != d.Group || d2.TP != d.TP || d2.Tombstone != d.Tombstone {
			t.Fatalf("re-decode %+v -> %+v, %v", d, d2, err)
		}
	})
}

// retentionMs is offsets.retention.minutes' default (10080) in ms.
const retentionMs = 10080 * 60 * 1000

// commitAt commits offs for member (generation gen; -1: a client outside group management)
// of group g at the env's time and completes the write at log offset base.
func (e *env) commitAt(gen int32, member string, base int64, offs map[TP]int64) {
	e.t.Helper()
	req := CommitRequest{Group: "g", Generation: gen, MemberID: member}
	if err := e.m.CheckCommit(e.now, req); err != nil {
		e.t.Fatalf("commit: %v", err)
	}
	c := map[TP]Committed{}
	for tp, o := range offs {
		c[tp] = Committed{Offset: o, LeaderEpoch: -1, CommitTimestamp: e.now}
	}
	e.m.CommitPending(req.Group, c)
	e.m.CommitStored(req.Group, c, base, nil)
}

// tombstones drains the Machine's writes and returns the keys of the tombstones among them.
func (e *env) tombstones() []string {
	var out []string
	for _, s := range e.m.DrainStores() {
		for _, r := range s.Records() {
			if r.Value == nil {
				d, _ := DecodeRecord(r.Key, nil)
				if d.IsOffset {
					out = append(out, fmt.Sprintf("%s/%s-%d", d.Group, d.TP.Topic, d.TP.Partition))
				} else {
					out = append(out, d.Group)
				}
			}
		}
		e.m.Stored(e.now, &s, nil)
	}
	return out
}

// TestOffsetsExpireStandalone: the commits of a client outside group management (generation
// -1, no protocol type) expire offsets.retention.minutes after their commit, checked every
// offsets.retention.check.interval.ms; the tombstones are for the driver to write, and the
// group, left empty without offsets, goes (no group tombstone: it never had a generation).
func TestOffsetsExpireStandalone(t *testing.T) {
	e := newEnv(t, 0)
	tp := TP{"t", 0}
	e.commitAt(-1, "", 10, map[TP]int64{tp: 5})
	e.advance(retentionMs - 600000)
	if offs, _ := e.m.Committed("g", nil); len(offs) != 1 || len(e.tombstones()) != 0 {
		t.Fatalf("commit expired before offsets.retention.minutes: %v", offs)
	}
	e.advance(600000)
	if offs, _ := e.m.Committed("g", nil); len(offs) != 0 {
		t.Fatalf("commit still there offsets.retention.minutes after it: %v", offs)
	}
	if got := e.tombstones(); !slices.Equal(got, []string{"g/t-0"}) {
		t.Fatalf("tombstones %v, want the expired offset's only", got)
	}
	if _, ok := e.m.Stats("g"); ok {
		t.Fatal("the empty group without offsets is still held")
	}
}

// TestOffsetsExpireAfterGroupEmpty (KIP-211): a consumer group's offsets do not expire while
// it has members, however old the commits; once it is Empty they expire
// offsets.retention.minutes after it became Empty, and the group goes with a tombstone.
func TestOffsetsExpireAfterGroupEmpty(t *testing.T) {
	e := newEnv(t, 0)
	a, b, gen := twoMembers(t, e)
	tp := TP{"t", 0}
	e.commitAt(gen, a, 10, map[TP]int64{tp: 5})
	for end := e.now + 8*24*3600*1000; e.now < end; { // 8 days of heartbeats
		e.advance(9000)
		wantErr(t, "heartbeat", e.m.Heartbeat(e.now, "g", a, "", gen), nil)
		wantErr(t, "heartbeat", e.m.Heartbeat(e.now, "g", b, "", gen), nil)
	}
	if offs, _ := e.m.Committed("g", nil); len(offs) != 1 {
		t.Fatalf("a Stable group's offset expired: %v", offs)
	}
	e.m.Leave(e.now, "g", []LeaveMember{{MemberID: a}, {MemberID: b}})
	if e.state() != Empty {
		t.Fatalf("state %v after everyone left, want Empty", e.state())
	}
	e.tombstones()
	e.advance(retentionMs - 600000)
	if offs, _ := e.m.Committed("g", nil); len(offs) != 1 {
		t.Fatalf("offset expired before offsets.retention.minutes since the group became Empty: %v", offs)
	}
	e.advance(600000)
	if offs, _ := e.m.Committed("g", nil); len(offs) != 0 {
		t.Fatalf("offset of an Empty group kept past offsets.retention.minutes: %v", offs)
	}
	if got := e.tombstones(); !slices.Equal(got, []string{"g/t-0", "g"}) {
		t.Fatalf("tombstones %v, want the offset's and the group's", got)
	}
	if _, ok := e.m.Stats("g"); ok {
		t.Fatal("the expired Empty group is still held")
	}
}

// TestOffsetsOfUnsubscribedTopicExpire: in a Stable consumer group whose subscriptions the
// coordinator can read (the consumer protocol), the offsets of a topic no member subscribes
// to expire offsets.retention.minutes after their commit; the others stay (Kafka's
// removeExpiredOffsets, KIP-496).
func TestOffsetsOfUnsubscribedTopicExpire(t *testing.T) {
	e := newEnv(t, 0)
	sub := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	req := joinReq("", "")
	req.Protocols[0].Metadata = sub.AppendTo(nil)
	r, _ := e.join(req)
	req.MemberID = r.MemberID
	_, tk := e.join(req)
	e.advance(0)
	a := e.joined(tk).MemberID
	e.sync(a, 1, map[string][]byte{a: []byte("A")})
	e.commitAt(1, a, 10, map[TP]int64{{"t", 0}: 5, {"gone", 0}: 7})
	for e.now < 1000+retentionMs+600000 {
		e.advance(9000)
		wantErr(t, "heartbeat", e.m.Heartbeat(e.now, "g", a, "", 1), nil)
	}
	offs, _ := e.m.Committed("g", nil)
	if len(offs) != 1 || offs[TP{"t", 0}].Offset != 5 {
		t.Fatalf("offsets %v: want only the subscribed topic's", offs)
	}
	if got := e.tombstones(); !slices.Equal(got, []string{"g/gone-0"}) {
		t.Fatalf("tombstones %v", got)
	}
}
