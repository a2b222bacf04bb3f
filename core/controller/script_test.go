package controller

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

// TestScripts runs the controller's stories in testdata/*.txt (internal/scripttest): each
// command, then the cluster metadata it left, recorded by
// `go test ./core/controller -run TestScripts -rewrite`:
//
//	brokers 0:e1 1:fenced 2:e3
//	t-0 leader 0 epoch 1 partition-epoch 2 replicas 0,1,2 isr 0,2
//
// the registered brokers with their broker epochs (or fenced), then every
// partition: its leader, leader epoch, partition epoch, replicas, ISR and a reassignment in
// progress. The commands (the clock starts at 0; broker.session.timeout.ms is 9 s):
//
//	register 0 [damaged t-0]      a broker (re)starts: a new incarnation (broker epoch)
//	create t replicas 0,1,2 [/ 1,2,0 ...] [config k=v ...]
//	                              a topic placed by hand, one replica list per partition
//	alter t-0 isr 0,1 [leader 0] [leader-epoch N] [partition-epoch N] [broker-epochs 4,5]
//	                              the leader's AlterPartition; the epochs default to the
//	                              current ones (the leader's view), the members' broker
//	                              epochs to their current registrations
//	down 1 / up 1                 fence / unfence a broker (BrokerDown / BrokerUp)
//	heartbeat 1 / tick 5s / check-sessions
//	                              session fencing: a broker whose last heartbeat is older
//	                              than the session timeout is fenced; a heartbeat unfences it
//	elect t-0 preferred|unclean   the ElectLeaders API
//	transfer t-0 2                a forced clean move to an alive ISR member
//	topic-config t k=v            AlterTopicConfig
//	reassign t-0 3,4,5 | cancel   AlterPartitionReassignments
//	stats                         a query: elections, unclean elections, lost offsets, ISR changes
//
// A command that fails is recorded as "error: CODE" (Kafka's error code) when it starts
// with "fail"; without "fail" an error fails the test.
func TestScripts(t *testing.T) {
	scripttest.RunDir(t, "testdata", func(t *testing.T) scripttest.Handler {
		s := &ctrlScript{}
		s.c = New(Config{Now: func() int64 { return s.now }, Logf: t.Logf})
		t.Cleanup(s.c.Close)
		return s.handle
	})
}

type ctrlScript struct {
	c   *Controller
	now int64
}

func (s *ctrlScript) handle(t *testing.T, cmd *scripttest.Cmd) string {
	name, args := cmd.Name, cmd.Args
	fail := name == "fail"
	if fail {
		if len(args) == 0 {
			cmd.Fatalf(t, "fail what?")
		}
		name, args = args[0], args[1:]
	}
	if name == "stats" {
		st := s.c.Stats()
		return fmt.Sprintf("elections %d unclean %d lost-offsets %d isr-changes %d controller-isr-shrinks %d offline %d fenced %d active %d",
			st.Elections, st.UncleanElections, st.LostOffsets, st.ISRChanges, st.ISRShrinks, st.OfflinePartitions, st.FencedBrokers, st.ActiveBrokers)
	}
	err := s.do(name, args)
	switch {
	case fail && err == nil:
		cmd.Fatalf(t, "succeeded, want an error")
	case !fail && err != nil:
		cmd.Fatalf(t, "%v", err)
	}
	out := s.state()
	if fail {
		out = "error: " + errCodeName(err) + "\n" + out
	}
	return out
}

// errCodeName is the Kafka error codes in err's tree joined by "/" (AlterPartition answers
// INVALID_REQUEST/INELIGIBLE_REPLICA to old clients and new alike), or its message.
func errCodeName(err error) string {
	var codes []string
	var walk func(error)
	walk = func(e error) {
		var ke *kerr.Error
		if errors.As(e, &ke) && e == error(ke) {
			codes = append(codes, ke.Message)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	if len(codes) == 0 {
		return err.Error()
	}
	return strings.Join(codes, "/")
}

func (s *ctrlScript) do(name string, args []string) error {
	switch name {
	case "register":
		id, err := parseID(arg(args, 0))
		if err != nil {
			return err
		}
		reg := Registration{ID: id, Host: "127.0.0.1", Port: 9092 + id}
		if len(args) == 3 && args[1] == "damaged" {
			tp, err := parseTP(args[2])
			if err != nil {
				return err
			}
			reg.Damaged = []TopicPartition{tp}
		}
		_, err = s.c.RegisterBroker(reg)
		if err == nil {
			s.c.Heartbeat(id, -1)
		}
		return err
	case "create":
		if len(args) < 3 || args[1] != "replicas" {
			return fmt.Errorf(`want "create t replicas 0,1,2 [/ 1,2,0] [config k=v ...]"`)
		}
		var assign []ReplicaAssignment
		configs := map[string]string{}
		rest := args[2:]
		for i := 0; i < len(rest); i++ {
			switch {
			case rest[i] == "/":
			case rest[i] == "config":
				for _, kv := range rest[i+1:] {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("config %q: want k=v", kv)
					}
					configs[k] = v
				}
				i = len(rest)
			default:
				ids, err := parseIDs(rest[i])
				if err != nil {
					return err
				}
				assign = append(assign, ReplicaAssignment{Partition: int32(len(assign)), Replicas: ids})
			}
		}
		_, err := s.c.CreateTopicAssigned(args[0], assign, configs, false)
		return err
	case "alter":
		tp, err := parseTP(arg(args, 0))
		if err != nil {
			return err
		}
		st, ok := s.c.Partition(tp.Topic, tp.Partition)
		if !ok {
			return fmt.Errorf("no partition %s", args[0])
		}
		req := AlterPartitionRequest{Topic: tp.Topic, Partition: tp.Partition, Leader: st.Leader,
			LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch}
		var epochs []int64
		for i := 1; i+1 < len(args); i += 2 {
			v := args[i+1]
			switch args[i] {
			case "isr":
				req.ISR, err = parseIDs(v)
			case "leader":
				req.Leader, err = parseID(v)
			case "leader-epoch":
				var n int64
				n, err = strconv.ParseInt(v, 10, 32)
				req.LeaderEpoch = int32(n)
			case "partition-epoch":
				var n int64
				n, err = strconv.ParseInt(v, 10, 32)
				req.PartitionEpoch = int32(n)
			case "broker-epochs":
				for _, f := range strings.Split(v, ",") {
					n, perr := strconv.ParseInt(f, 10, 64)
					if perr != nil {
						return fmt.Errorf("broker-epochs %q: %w", v, perr)
					}
					epochs = append(epochs, n)
				}
			default:
				return fmt.Errorf("alter: unknown argument %q", args[i])
			}
			if err != nil {
				return fmt.Errorf("alter %s: %w", args[i], err)
			}
		}
		req.LeaderBrokerEpoch = s.c.BrokerEpoch(req.Leader)
		if epochs == nil {
			for _, id := range req.ISR {
				epochs = append(epochs, s.c.BrokerEpoch(id))
			}
		}
		req.BrokerEpochs = epochs
		_, err = s.c.AlterPartition(req)
		return err
	case "down", "up", "heartbeat":
		id, err := parseID(arg(args, 0))
		if err != nil {
			return err
		}
		switch name {
		case "down":
			s.c.BrokerDown(id)
		case "up":
			s.c.BrokerUp(id)
		default:
			s.c.Heartbeat(id, s.c.BrokerEpoch(id))
		}
		return nil
	case "tick":
		d, err := time.ParseDuration(arg(args, 0))
		if err != nil {
			return err
		}
		s.now += int64(d)
		return nil
	case "check-sessions":
		s.c.CheckSessions()
		return nil
	case "elect":
		tp, err := parseTP(arg(args, 0))
		if err != nil {
			return err
		}
		if k := arg(args, 1); k != "preferred" && k != "unclean" {
			return fmt.Errorf("elect %s %s: want preferred or unclean", args[0], k)
		}
		_, err = s.c.ElectLeader(tp.Topic, tp.Partition, args[1] == "unclean")
		return err
	case "transfer":
		tp, err := parseTP(arg(args, 0))
		if err != nil {
			return err
		}
		to, err := parseID(arg(args, 1))
		if err != nil {
			return err
		}
		_, err = s.c.TransferLeader(tp.Topic, tp.Partition, to)
		return err
	case "topic-config":
		set := map[string]string{}
		for _, kv := range args[min(1, len(args)):] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("topic-config %q: want k=v", kv)
			}
			set[k] = v
		}
		return s.c.AlterTopicConfig(arg(args, 0), set, nil)
	case "reassign":
		tp, err := parseTP(arg(args, 0))
		if err != nil {
			return err
		}
		r := Reassignment{Topic: tp.Topic, Partition: tp.Partition}
		if a := arg(args, 1); a != "cancel" {
			if r.Replicas, err = parseIDs(a); err != nil {
				return err
			}
		}
		return errors.Join(s.c.AlterPartitionReassignments([]Reassignment{r}, true)...)
	}
	return fmt.Errorf("unknown command %q", name)
}

// state is the brokers with their epochs, then every partition.
func (s *ctrlScript) state() string {
	var b strings.Builder
	b.WriteString("brokers")
	for _, bi := range s.c.Brokers() {
		if bi.Alive {
			fmt.Fprintf(&b, " %d:e%d", bi.ID, s.c.BrokerEpoch(bi.ID))
		} else {
			fmt.Fprintf(&b, " %d:fenced", bi.ID)
		}
	}
	b.WriteString("\n")
	topics := s.c.Topics()
	slices.Sort(topics)
	for _, name := range topics {
		parts, _ := s.c.Partitions(name)
		for _, st := range parts {
			leader := "none"
			if st.Leader != NoLeader {
				leader = strconv.Itoa(int(st.Leader))
			}
			fmt.Fprintf(&b, "%s-%d leader %s epoch %d partition-epoch %d replicas %s isr %s",
				st.Topic, st.Partition, leader, st.LeaderEpoch, st.PartitionEpoch, joinIDs(st.Replicas), joinIDs(st.ISR))
			if len(st.AddingReplicas) > 0 {
				fmt.Fprintf(&b, " adding %s", joinIDs(st.AddingReplicas))
			}
			if len(st.RemovingReplicas) > 0 {
				fmt.Fprintf(&b, " removing %s", joinIDs(st.RemovingReplicas))
			}
			if d := s.c.Damaged(st.Topic, st.Partition); len(d) > 0 {
				fmt.Fprintf(&b, " damaged %s", joinIDs(d))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func parseID(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("broker id %q: %w", s, err)
	}
	return int32(n), nil
}

func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := parseID(f)
		if err != nil {
			return nil, fmt.Errorf("broker list %q: %w", s, err)
		}
		out = append(out, id)
	}
	return out, nil
}

func parseTP(s string) (TopicPartition, error) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return TopicPartition{}, fmt.Errorf("partition %q: want topic-N", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return TopicPartition{}, fmt.Errorf("partition %q: %w", s, err)
	}
	return TopicPartition{Topic: s[:i], Partition: int32(p)}, nil
}
