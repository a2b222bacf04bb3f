package group

import (
	"crypto/rand"
	"encoding/hex"
)

// State is a group's state in Kafka's classic group state machine (GroupMetadata.scala).
type State int8

// The group states. Transitions (Kafka's validPreviousStates):
//
//	Empty               -> PreparingRebalance (a member joins), Dead (deleted, unloaded)
//	PreparingRebalance  -> CompletingRebalance (join done), Empty (join done, no member left), Dead
//	CompletingRebalance -> Stable (leader's assignment stored), PreparingRebalance (member change), Dead
//	Stable              -> PreparingRebalance (member change, leader or protocol change), Dead
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String is Kafka's name of the state, as DescribeGroups and ListGroups report it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// Protocol is one (name, metadata) pair of a JoinGroup: for consumers the assignor name
// ("range", "roundrobin", "sticky", "cooperative-sticky") and the subscription it encodes.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup. Fields are Kafka's; "" stands for a null string. The Machine
// keeps the protocol metadata it is given: the caller must not reuse those bytes.
type JoinRequest struct {
	Group              string
	MemberID           string // "" = a new member
	InstanceID         string // group.instance.id; "" = dynamic membership
	ClientID           string
	ClientHost         string
	ProtocolType       string // "consumer" for consumers
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32 // JoinGroup v0 has none: the session timeout is used
	Protocols          []Protocol
	// RequireKnownMemberID is true from JoinGroup v4: a new dynamic member first gets
	// MEMBER_ID_REQUIRED with its member id and joins again with it (KIP-394).
	RequireKnownMemberID bool
	// SupportsSkipAssignment is true from JoinGroup v9 (KIP-814): a restarted static leader
	// of a Stable group may be told that it leads, with SkipAssignment set.
	SupportsSkipAssignment bool
}

// JoinMember is one member in the leader's JoinGroup response.
type JoinMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte // the member's metadata for the selected protocol
}

// JoinResult is a JoinGroup response. Err is nil or a kerr error (MEMBER_ID_REQUIRED comes
// with MemberID set).
type JoinResult struct {
	Err          error
	MemberID     string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	Members      []JoinMember // the leader only
	// SkipAssignment (JoinGroup v9+): the leader must not compute an assignment, the group
	// keeps its own (a restarted static leader of a Stable group).
	SkipAssignment bool
}

// SyncRequest is a SyncGroup. Assignments is set by the leader only.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   string
	ProtocolType string // SyncGroup v5+; "" = not checked
	Protocol     string // SyncGroup v5+; "" = not checked
	Assignments  map[string][]byte
}

// SyncResult is a SyncGroup response.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// LeaveMember is one member of a LeaveGroup (v3+ carries several; v0-v2 one member id).
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// CommitRequest is the group part of an OffsetCommit; the offsets are checked by the caller.
type CommitRequest struct {
	Group      string
	Generation int32 // -1 = a client that uses Kafka only to store offsets
	MemberID   string
	InstanceID string
}

// MemberDescription is one member of a DescribeGroups answer.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte // only when the group is Stable
}

// Description is a DescribeGroups answer for one group.
type Description struct {
	Group        string
	State        State
	ProtocolType string
	Protocol     string // only when Stable
	Members      []MemberDescription
}

// Listing is one group of a ListGroups answer.
type Listing struct {
	Group        string
	ProtocolType string
	State        State
}

// Stats counts one group's rebalances on this coordinator since it loaded the group.
type Stats struct {
	Generation int32
	State      State
	Members    int
	// Rebalances counts completed rebalances: PreparingRebalance -> Stable (or Empty).
	Rebalances int
	// RebalanceMs holds the duration of each completed rebalance (the last 1000), from
	// entering PreparingRebalance to Stable or Empty, in ms.
	RebalanceMs []float64
}

// Ticket names a parked JoinGroup or SyncGroup; the driver hands out unique non-zero
// tickets and receives the answer as a Reply with the same ticket.
type Ticket uint64

// Reply is the answer to a parked request: exactly one of Join and Sync is set.
type Reply struct {
	Ticket Ticket
	Join   *JoinResult
	Sync   *SyncResult
}

// member is one member of a group (Kafka's MemberMetadata).
type member struct {
	id, instanceID       string
	clientID, clientHost string
	protocolType         string
	protocols            []Protocol
	sessionTimeoutMs     int32
	rebalanceTimeoutMs   int32
	assignment           []byte
	lastHeartbeat        int64 // ms
	isNew                bool  // joined in the current rebalance and has not had a JoinGroup answer
	awaitingJoin         bool  // its JoinGroup is waiting for the rebalance to complete
	joinTicket           Ticket
	awaitingSync         bool
	syncTicket           Ticket
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether the member's protocols equal ps (names and metadata, in order).
func (m *member) sameProtocols(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || string(ps[i].Metadata) != string(m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// group is one group's metadata (Kafka's GroupMetadata).
type group struct {
	id           string
	partition    int32
	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	order        []string         // member ids in join order (leader election, response order)
	pending      map[string]int64 // member ids handed out with MEMBER_ID_REQUIRED -> expiry (ms)
	static       map[string]string
	offsets      map[TP]Committed
	// pendingCommits counts the commits of each partition appended and not yet
	// acknowledged (Kafka's pendingOffsetCommits): such a partition's offset does not expire.
	pendingCommits map[TP]int
	// stateTimestamp is when the group entered its state (ms; -1 unknown: a group loaded
	// from a GroupMetadataValue before v2, or known only through its commits).
	stateTimestamp int64

	// PreparingRebalance: when the join completes at the latest (ms). While initialDelay is
	// set (a rebalance from Empty), the join never completes early: it is extended by
	// group.initial.rebalance.delay.ms while new members keep arriving, up to remaining.
	joinDeadline   int64
	initialDelay   bool
	remaining      int64
	newMemberAdded bool
	// CompletingRebalance: members that have not sent SyncGroup yet, removed at syncDeadline.
	pendingSync  map[string]bool
	syncDeadline int64
	storing      bool // the leader's assignment is being written

	rebalanceStart int64 // ms; 0 when not rebalancing
	stats          Stats

	// txnOffsets are the offsets committed in open transactions (TxnOffsetCommit), by
	// producer id: applied to offsets by the transaction's COMMIT marker, dropped by its
	// ABORT (txnoffsets.go).
	txnOffsets map[int64]map[TP]Committed
}

func newGroup(id string, partition int32) *group {
	return &group{
		id: id, partition: partition, state: Empty,
		members: map[string]*member{}, pending: map[string]int64{}, static: map[string]string{},
		offsets: map[TP]Committed{}, pendingCommits: map[TP]int{}, pendingSync: map[string]bool{}, stateTimestamp: -1,
	}
}

// transition moves g to state s at now (ms).
func (g *group) transition(s State, now int64) {
	g.state, g.stateTimestamp = s, now
}

func (g *group) addMember(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

func (g *group) dropMember(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	delete(g.pendingSync, id)
	for i, o := range g.order {
		if o == id {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
}

// renameMember gives member old the id new (a static member rejoining with a new member id).
func (g *group) renameMember(old, new string) *member {
	m := g.members[old]
	delete(g.members, old)
	m.id = new
	g.members[new] = m
	for i, o := range g.order {
		if o == old {
			g.order[i] = new
		}
	}
	if m.instanceID != "" {
		g.static[m.instanceID] = new
	}
	if g.leader == old {
		g.leader = new
	}
	if g.pendingSync[old] {
		delete(g.pendingSync, old)
		g.pendingSync[new] = true
	}
	return m
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: a first member needs a
// protocol type and at least one protocol; later ones the same type and a protocol every
// member supports.
func (g *group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if len(ps) == 0 || protocolType == "" {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, name := range g.candidates() {
		for _, p := range ps {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// candidates lists the protocols every member supports, in the first member's order.
func (g *group) candidates() []string {
	var out []string
	first := true
	for _, id := range g.order {
		m := g.members[id]
		if first {
			for _, p := range m.protocols {
				out = append(out, p.Name)
			}
			first = false
			continue
		}
		keep := out[:0]
		for _, name := range out {
			if hasProtocol(m.protocols, name) {
				keep = append(keep, name)
			}
		}
		out = keep
	}
	return out
}

func hasProtocol(ps []Protocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: each member votes for the first of its protocols that every
// member supports; the most votes win (ties: the candidate listed first).
func (g *group) selectProtocol() string {
	cands := g.candidates()
	if len(cands) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if hasProtocol(protocolsOf(cands), p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := cands[0]
	for _, c := range cands {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func protocolsOf(names []string) []Protocol {
	ps := make([]Protocol, len(names))
	for i, n := range names {
		ps[i].Name = n
	}
	return ps
}

// maxRebalanceTimeout is the largest rebalance timeout of the members (Kafka's
// GroupMetadata.rebalanceTimeoutMs).
func (g *group) maxRebalanceTimeout() int64 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.rebalanceTimeoutMs)
	}
	return int64(t)
}

// defaultMemberID is clientID + "-" + a random UUID, as Kafka's member ids.
func defaultMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return clientID + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
