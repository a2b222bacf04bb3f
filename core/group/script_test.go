package group

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/internal/scripttest"
)

// TestScripts runs the group coordinator's stories in testdata/*.txt (internal/scripttest)
// against the Machine, the pure state machine the Coordinator drives: each command, then
// what it produced and the group it left, recorded by
// `go test ./core/group -run TestScripts -rewrite`:
//
//	join c-1: generation 1 leader c-1 protocol range members c-1,c-2   (an answer)
//	write group metadata generation 1 members c-1,c-2                  (a __consumer_offsets write)
//	g Stable generation 1 leader c-1 members c-1,c-2 offsets t-0=5
//
// Answers of parked requests appear under the command that completed them. Every
// __consumer_offsets write succeeds at once (the Coordinator's appends and acks=all are not
// part of the Machine). The group is "g", its coordinator owns its partition from the
// start, and the clock starts at 0 s. The commands:
//
//	config delay 3s retention 1m check 10s     group.initial.rebalance.delay.ms,
//	                                           offsets.retention.minutes (in minutes),
//	                                           offsets.retention.check.interval.ms; first only
//	join c [member ID] [instance I] [protocol range] [session 10s] [rebalance 30s]
//	                                           JoinGroup v5+ of a client c (member ids are
//	                                           "c-N"); parks until the rebalance completes
//	sync ID gen N [assign ID=A,ID=B]           SyncGroup (the leader's carries the assignment)
//	heartbeat ID gen N
//	leave ID | leave instance I                LeaveGroup
//	commit t-0=5 [t-1=7] [member ID gen N]     OffsetCommit (no member: generation -1, a
//	                                           consumer that only stores offsets)
//	offsets                                    a query: OffsetFetch of every partition
//	tick 3s                                    advance the clock, running every timer due
//
// A command that fails records "error: CODE"; it must start with "fail" then.
func TestScripts(t *testing.T) {
	scripttest.RunDir(t, "testdata", func(t *testing.T) scripttest.Handler {
		s := &groupScript{cfg: DefaultConfig(), syncs: map[Ticket]string{}}
		s.cfg.OffsetsTopicNumPartitions = 1
		s.cfg.NewMemberID = func(client string) string { s.ids++; return client + "-" + strconv.Itoa(s.ids) }
		return s.handle
	})
}

type groupScript struct {
	cfg  Config
	m    *Machine
	now  int64 // ms
	ids  int
	next Ticket
	// syncs names the member of each parked SyncGroup, for its answer.
	syncs map[Ticket]string
	out   strings.Builder // what the current command produced
}

func (s *groupScript) handle(t *testing.T, cmd *scripttest.Cmd) string {
	name, args := cmd.Name, cmd.Args
	fail := name == "fail"
	if fail {
		if len(args) == 0 {
			cmd.Fatalf(t, "fail what?")
		}
		name, args = args[0], args[1:]
	}
	if name == "config" {
		if s.m != nil {
			cmd.Fatalf(t, "config after the first request")
		}
		if err := s.config(args); err != nil {
			cmd.Fatalf(t, "%v", err)
		}
		return "ok"
	}
	if s.m == nil {
		s.m = NewMachine(s.cfg)
		s.m.BeginLoad(0)
		s.m.FinishLoad(s.now, 0, nil)
	}
	s.out.Reset()
	if name == "offsets" {
		offs, err := s.m.Committed("g", nil)
		if err != nil {
			cmd.Fatalf(t, "%v", err)
		}
		if len(offs) == 0 {
			return "no committed offsets"
		}
		for _, tp := range slices.SortedFunc(mapsKeys(offs), cmpTP) {
			c := offs[tp]
			fmt.Fprintf(&s.out, "%s-%d offset %d committed at %v\n", tp.Topic, tp.Partition, c.Offset, time.Duration(c.CommitTimestamp)*time.Millisecond)
		}
		return s.out.String()
	}
	err := s.do(name, args)
	switch {
	case fail && err == nil:
		cmd.Fatalf(t, "succeeded, want an error")
	case !fail && err != nil:
		cmd.Fatalf(t, "%v", err)
	case fail:
		fmt.Fprintf(&s.out, "error: %s\n", codeOf(err))
	}
	s.settle()
	s.out.WriteString(s.state())
	return s.out.String()
}

func (s *groupScript) config(args []string) error {
	for i := 0; i+1 < len(args); i += 2 {
		d, err := time.ParseDuration(args[i+1])
		if err != nil {
			return fmt.Errorf("config %s: %w", args[i], err)
		}
		switch args[i] {
		case "delay":
			s.cfg.InitialRebalanceDelayMs = d.Milliseconds()
		case "retention":
			s.cfg.OffsetsRetentionMinutes = int32(d.Minutes())
		case "check":
			s.cfg.OffsetsRetentionCheckIntervalMs = d.Milliseconds()
		default:
			return fmt.Errorf("unknown config %q", args[i])
		}
	}
	return nil
}

// codeOf is err's Kafka error code, or its message.
func codeOf(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// kv parses "key value" pairs.
func kv(args []string) (map[string]string, error) {
	m := map[string]string{}
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return nil, fmt.Errorf("%q needs a value", args[i])
		}
		m[args[i]] = args[i+1]
	}
	return m, nil
}

func (s *groupScript) do(name string, args []string) error {
	switch name {
	case "join":
		if len(args) == 0 {
			return fmt.Errorf("join needs a client id")
		}
		o, err := kv(args[1:])
		if err != nil {
			return err
		}
		req := JoinRequest{Group: "g", MemberID: o["member"], InstanceID: o["instance"], ClientID: args[0],
			ClientHost: "/127.0.0.1", ProtocolType: "consumer", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000,
			RequireKnownMemberID: true}
		proto := "range"
		if p, ok := o["protocol"]; ok {
			proto = p
		}
		req.Protocols = []Protocol{{Name: proto, Metadata: []byte("subscription")}}
		for k, f := range map[string]*int32{"session": &req.SessionTimeoutMs, "rebalance": &req.RebalanceTimeoutMs} {
			if v, ok := o[k]; ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return fmt.Errorf("join %s: %w", k, err)
				}
				*f = int32(d.Milliseconds())
			}
		}
		s.next++
		res, parked := s.m.Join(s.now, req, s.next)
		if parked {
			fmt.Fprintf(&s.out, "join %s: parked\n", who(req.MemberID, args[0]))
			return nil
		}
		s.printJoin(who(req.MemberID, args[0]), res)
		return res.Err
	case "sync":
		if len(args) < 3 || args[1] != "gen" {
			return fmt.Errorf(`want "sync ID gen N [assign ID=A,...]"`)
		}
		gen, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		req := SyncRequest{Group: "g", Generation: int32(gen), MemberID: args[0]}
		if len(args) == 5 && args[3] == "assign" {
			req.Assignments = map[string][]byte{}
			for _, a := range strings.Split(args[4], ",") {
				k, v, _ := strings.Cut(a, "=")
				req.Assignments[k] = []byte(v)
			}
		}
		s.next++
		res, parked, store := s.m.Sync(s.now, req, s.next)
		if store != nil {
			s.printStore(store)
			s.m.SyncStored(s.now, store, nil)
		}
		if parked {
			s.syncs[s.next] = args[0]
			if store == nil {
				fmt.Fprintf(&s.out, "sync %s: parked\n", args[0])
			}
			return nil
		}
		s.printSync(args[0], res)
		return res.Err
	case "heartbeat":
		if len(args) != 3 || args[1] != "gen" {
			return fmt.Errorf(`want "heartbeat ID gen N"`)
		}
		gen, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		return s.m.Heartbeat(s.now, "g", args[0], "", int32(gen))
	case "leave":
		lm := LeaveMember{MemberID: arg0(args)}
		if len(args) == 2 && args[0] == "instance" {
			lm = LeaveMember{InstanceID: args[1]}
		}
		top, per := s.m.Leave(s.now, "g", []LeaveMember{lm})
		return errors.Join(append([]error{top}, per...)...)
	case "commit":
		req := CommitRequest{Group: "g", Generation: -1}
		offs := map[TP]Committed{}
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "member", "gen":
				if i+1 >= len(args) {
					return fmt.Errorf("%s needs a value", args[i])
				}
				if args[i] == "member" {
					req.MemberID = args[i+1]
				} else {
					g, err := strconv.Atoi(args[i+1])
					if err != nil {
						return err
					}
					req.Generation = int32(g)
				}
				i++
			default:
				k, v, ok := strings.Cut(args[i], "=")
				j := strings.LastIndexByte(k, '-')
				off, err := strconv.ParseInt(v, 10, 64)
				p, perr := strconv.ParseInt(k[j+1:], 10, 32)
				if !ok || j <= 0 || err != nil || perr != nil {
					return fmt.Errorf("commit %q: want topic-N=offset", args[i])
				}
				offs[TP{k[:j], int32(p)}] = Committed{Offset: off, LeaderEpoch: -1, CommitTimestamp: s.now}
			}
		}
		if err := s.m.CheckCommit(s.now, req); err != nil {
			return err
		}
		s.m.CommitPending("g", offs)
		s.m.CommitStored("g", offs, 0, nil)
		return nil
	case "tick":
		d, err := time.ParseDuration(arg0(args))
		if err != nil {
			return err
		}
		end := s.now + d.Milliseconds()
		for {
			if dl := s.m.NextDeadline(); dl <= end {
				s.now = max(s.now, dl)
				s.m.Tick(s.now)
				s.settle()
				continue
			}
			break
		}
		s.now = end
		s.m.Tick(s.now)
		return nil
	}
	return fmt.Errorf("unknown command %q", name)
}

// settle prints the answers of parked requests and performs the Machine's writes.
func (s *groupScript) settle() {
	for {
		replies, stores := s.m.Drain(), s.m.DrainStores()
		if len(replies) == 0 && len(stores) == 0 {
			return
		}
		for _, r := range replies {
			switch {
			case r.Join != nil:
				s.printJoin(r.Join.MemberID, *r.Join)
			case r.Sync != nil:
				s.printSync(s.syncs[r.Ticket], *r.Sync)
				delete(s.syncs, r.Ticket)
			}
		}
		for i := range stores {
			s.printStore(&stores[i])
			s.m.Stored(s.now, &stores[i], nil)
		}
	}
}

func (s *groupScript) printJoin(member string, r JoinResult) {
	if r.Err != nil {
		fmt.Fprintf(&s.out, "join %s: %s", member, codeOf(r.Err))
		if r.MemberID != "" && r.MemberID != member {
			fmt.Fprintf(&s.out, " member id %s", r.MemberID)
		}
		s.out.WriteString("\n")
		return
	}
	fmt.Fprintf(&s.out, "join %s: generation %d leader %s protocol %s", r.MemberID, r.Generation, r.Leader, r.Protocol)
	if len(r.Members) > 0 {
		ids := make([]string, len(r.Members))
		for i, m := range r.Members {
			ids[i] = m.MemberID
		}
		fmt.Fprintf(&s.out, " members %s", strings.Join(ids, ","))
	}
	if r.SkipAssignment {
		s.out.WriteString(" skip-assignment")
	}
	s.out.WriteString("\n")
}

func (s *groupScript) printSync(who string, r SyncResult) {
	if r.Err != nil {
		fmt.Fprintf(&s.out, "sync %s: %s\n", who, codeOf(r.Err))
		return
	}
	fmt.Fprintf(&s.out, "sync %s: assignment %q\n", who, r.Assignment)
}

func (s *groupScript) printStore(st *GroupStore) {
	if st.tombstones != nil {
		fmt.Fprintf(&s.out, "write %d tombstones\n", len(st.tombstones))
		return
	}
	ids := make([]string, len(st.Stored.Members))
	for i, m := range st.Stored.Members {
		ids[i] = m.MemberID
	}
	if len(ids) == 0 {
		ids = []string{"none"}
	}
	fmt.Fprintf(&s.out, "write group metadata generation %d members %s\n", st.Generation, strings.Join(ids, ","))
}

// state is the group's line: state, generation, leader, members (static ones with their
// instance id) and committed offsets.
func (s *groupScript) state() string {
	g := s.m.groups["g"]
	if g == nil {
		return "g Dead (not held)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "g %v generation %d", g.state, g.generation)
	if g.leader != "" {
		fmt.Fprintf(&b, " leader %s", g.leader)
	}
	var ms []string
	for _, id := range g.order {
		if mb := g.members[id]; mb != nil {
			if mb.instanceID != "" {
				id += "(" + mb.instanceID + ")"
			}
			ms = append(ms, id)
		}
	}
	if len(ms) > 0 {
		fmt.Fprintf(&b, " members %s", strings.Join(ms, ","))
	}
	var offs []string
	for _, tp := range slices.SortedFunc(mapsKeys(g.offsets), cmpTP) {
		offs = append(offs, fmt.Sprintf("%s-%d=%d", tp.Topic, tp.Partition, g.offsets[tp].Offset))
	}
	if len(offs) > 0 {
		fmt.Fprintf(&b, " offsets %s", strings.Join(offs, ","))
	}
	b.WriteString("\n")
	return b.String()
}

func cmpTP(a, b TP) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition - b.Partition)
}

func who(member, client string) string {
	if member != "" {
		return member
	}
	return "new " + client
}

func arg0(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}
