package partition

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/internal/scripttest"
)

// TestScripts runs the scenario scripts in testdata/*.txt (internal/scripttest): each is a
// story, one command per line ("#" starts a comment), and under each command the state it
// left, recorded by `go test ./core/partition -run TestScripts -rewrite`:
//
//	0 leader   epoch 0  leo 10  hw 7   isr 0,1,2
//	1 follower epoch 0  leo 9   hw 0
//	2 down
//
// one line per broker: its role, the leader epoch it knows, its LEO and HW, and on the
// leader the ISR (and an ISR change pending at the controller). The commands:
//
//	config minisr 2 lag 30s [hwupdate atomic|mutex] [truncate epoch|hw]
//	                              (before "replicas"; "reset" starts over)
//	replicas 0,1,2                brokers hosting the partition (registered
//	                              with a real core/controller.Controller)
//	leader 0 isr 0,1,2            the controller creates the partition: the
//	                              first replica leads (leader epoch 0); a
//	                              smaller ISR is the leader's AlterPartition
//	elect 1 [unclean] [defer]     through the controller: clean, a forced
//	                              move to 1 (TransferLeader: 1 must be an
//	                              alive ISR member), then the dead brokers'
//	                              sessions expire (BrokerDown, in the order
//	                              they died); unclean, the sessions expire
//	                              with unclean.leader.election.enable on and
//	                              the controller's rule must pick 1. Live
//	                              followers truncate (OffsetForLeaderEpoch)
//	                              unless "defer" (their fetchers lag behind
//	                              the leader changes: fast failover)
//	truncate 1                    run a follower's deferred truncation
//	fail <command>                the command must fail; its error is recorded
//	append 0 records 10 [batch 5] [acks -1|1|0] [error CODE]
//	fetch 1 [max N]               replica fetch round trip (N batches max)
//	update 1 [offset 9]           the leader sees a fetch; the response is lost
//	tick 30s                      advance the clock
//	shrink                        ISR expiration on the leader (ISR changes,
//	                              fetch joins too, go through the controller's
//	                              AlterPartition)
//	kill 1 / crash 1 keep 5       stop (crash: the log keeps [0,5) only); the
//	                              controller notices at the next elect/restart
//	restart 1                     a new incarnation (RegisterBroker: new broker
//	                              epoch, out of the ISR until it catches up);
//	                              reopen (HW from its checkpoint), follow
//	repeat N: cmd; cmd            run commands N times
//
// Queries record their answer instead of the state: "consume" (what a consumer of the
// leader reads: FetchEnd), "logs 0,1" (identical or diverging logs, with their records
// when short), "lost" (committed offsets the leader lacks), "asks 1" (OffsetForLeaderEpoch
// rounds of broker 1's last truncation), "epochs 1" (its epoch cache) and "lastcaughtup 1"
// (the leader's caught-up time of follower 1).
//
// Any command may end with "at 100ms" (absolute clock). After every command the invariants
// are checked: HW <= LEO on every live replica, the leader's HW never decreases, the
// replicas have the controller's state and its leader leads that leader epoch. Every script
// runs three times, with hw.update=atomic, with hw.update=mutex and on the real core/log;
// all three must print what the first recorded.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			for i, v := range []struct {
				mode    string
				realLog bool
			}{{HWUpdateAtomic, false}, {HWUpdateMutex, false}, {HWUpdateAtomic, true}} {
				s := &scriptRun{t: t, hwMode: v.mode, realLog: v.realLog}
				s.cfg.HWUpdate = v.mode
				if i == 0 {
					scripttest.Run(t, f, s.handle)
				} else {
					scripttest.Check(t, f, s.handle)
				}
			}
		})
	}
}

type scriptRun struct {
	t       *testing.T
	hwMode  string
	realLog bool
	cfg     Config
	c       *testCluster
}

// handle runs one command and returns what it records.
func (s *scriptRun) handle(t *testing.T, cmd *scripttest.Cmd) string {
	out, err := s.exec(cmd.Line)
	if err != nil {
		cmd.Fatalf(t, "(hw.update=%s realLog=%v): %v", s.hwMode, s.realLog, err)
	}
	return out
}

// exec runs line and returns its output: a query's answer, or the state after it.
func (s *scriptRun) exec(line string) (string, error) {
	if rest, ok := strings.CutPrefix(line, "repeat "); ok {
		n, body, ok := strings.Cut(rest, ":")
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil {
			return "", fmt.Errorf("want \"repeat N: cmd; cmd\"")
		}
		out := ""
		for i := 0; i < count; i++ {
			for _, cmd := range strings.Split(body, ";") {
				if cmd = strings.TrimSpace(cmd); cmd != "" {
					if out, err = s.exec(cmd); err != nil {
						return "", fmt.Errorf("repeat %d: %q: %w", i, cmd, err)
					}
				}
			}
		}
		return out, nil
	}
	f := strings.Fields(line)
	if n := len(f); n >= 2 && f[n-2] == "at" {
		at, err := dur(f[n-1])
		if err != nil {
			return "", err
		}
		if s.c == nil || at < s.c.clock.ns {
			return "", fmt.Errorf("at %s: clock cannot go backwards", f[n-1])
		}
		s.c.clock.ns = at
		f = f[:n-2]
	}
	if ans, ok, err := s.query(f); ok {
		return ans, err
	}
	prefix := ""
	if f[0] == "fail" {
		if len(f) < 2 {
			return "", fmt.Errorf("fail what?")
		}
		err := s.do(f[1:])
		if err == nil {
			return "", fmt.Errorf("%s succeeded, want an error", strings.Join(f[1:], " "))
		}
		prefix = "error: " + errText(err) + "\n"
	} else if err := s.do(f); err != nil {
		return "", err
	}
	if s.c == nil {
		return prefix + "ok", nil
	}
	if err := s.c.check(); err != nil {
		return "", err
	}
	return prefix + s.c.state(), nil
}

// errText is an error as a script records it: its Kafka error code, or its message.
func errText(err error) string {
	if code := errCode(err); code != "UNKNOWN" {
		return code
	}
	return err.Error()
}

// state is one line per broker: role, known leader epoch, LEO, HW; the leader's ISR.
func (c *testCluster) state() string {
	var b strings.Builder
	for _, id := range c.ids {
		tb := c.brokers[id]
		if !tb.alive {
			fmt.Fprintf(&b, "%d down\n", id)
			continue
		}
		r := tb.r
		role := "follower"
		if r.IsLeader() {
			role = "leader"
		}
		fmt.Fprintf(&b, "%d %-8s epoch %d  leo %-5d hw %-5d", id, role, r.LeaderEpoch(), r.LEO(), r.HW())
		if r.IsLeader() {
			fmt.Fprintf(&b, " isr %s", joinIDs(r.ISR()))
			if p := r.PendingISR(); p != nil {
				fmt.Fprintf(&b, " pending %s", joinIDs(p))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func joinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// kv parses "key value" pairs after the positional arguments.
func kv(f []string) (map[string]string, error) {
	m := map[string]string{}
	for i := 0; i < len(f); i++ {
		if f[i] == "unclean" || f[i] == "defer" {
			m[f[i]] = "true"
			continue
		}
		if i+1 >= len(f) {
			return nil, fmt.Errorf("%q needs a value", f[i])
		}
		m[f[i]] = f[i+1]
		i++
	}
	return m, nil
}

func ids(s string) ([]int32, error) {
	var out []int32
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad broker list %q", s)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

func id(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	return int32(v), err
}

func (s *scriptRun) do(f []string) error {
	if s.c == nil && f[0] != "config" && f[0] != "replicas" && f[0] != "reset" {
		return fmt.Errorf("%s before replicas", f[0])
	}
	switch f[0] {
	case "reset":
		s.c, s.cfg = nil, Config{HWUpdate: s.hwMode}
		return nil
	case "config":
		m, err := kv(f[1:])
		if err != nil {
			return err
		}
		for k, v := range m {
			switch k {
			case "minisr":
				s.cfg.MinInsyncReplicas, err = strconv.Atoi(v)
			case "lag":
				var d int64
				d, err = dur(v)
				s.cfg.ReplicaLagTimeMaxMs = d / 1e6
			case "truncate":
				s.cfg.TruncateMode = v
			case "hwupdate":
				s.cfg.HWUpdate = v
			default:
				return fmt.Errorf("unknown config %q", k)
			}
			if err != nil {
				return fmt.Errorf("config %s: %w", k, err)
			}
		}
		return nil
	case "replicas":
		l, err := ids(f[1])
		if err != nil {
			return err
		}
		s.c = newTestCluster(s.t, s.cfg, l, s.realLog)
		return nil
	case "leader":
		if len(f) != 4 || f[2] != "isr" {
			return fmt.Errorf("want \"leader B isr a,b\"")
		}
		l, err := id(f[1])
		if err != nil {
			return err
		}
		isr, err := ids(f[3])
		if err != nil {
			return err
		}
		return s.c.create(l, isr)
	case "elect":
		l, err := id(f[1])
		if err != nil {
			return err
		}
		m, err := kv(f[2:])
		if err != nil {
			return err
		}
		if _, err := s.broker(f[1]); err != nil {
			return err
		}
		return s.c.elect(l, m["unclean"] == "true", m["defer"] == "true")
	case "truncate":
		b, err := s.broker(f[1])
		if err != nil {
			return err
		}
		return s.c.truncate(b)
	case "append":
		b, err := s.broker(f[1])
		if err != nil {
			return err
		}
		m, err := kv(f[2:])
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(m["records"])
		per := 1
		if v, ok := m["batch"]; ok {
			per, _ = strconv.Atoi(v)
		}
		acks := int16(-1)
		if v, ok := m["acks"]; ok {
			a, _ := strconv.Atoi(v)
			acks = int16(a)
		}
		if n <= 0 || per <= 0 {
			return fmt.Errorf("append needs records > 0 and batch > 0")
		}
		before := b.r.LEO()
		_, err = b.r.AppendAsLeader(s.c.makeBatches(n, per), acks)
		want := m["error"]
		if want == "" {
			return err
		}
		if got := errCode(err); got != want {
			return fmt.Errorf("append error %s (%v), want %s", got, err, want)
		}
		if b.r.LEO() != before {
			return fmt.Errorf("failed append moved LEO %d -> %d", before, b.r.LEO())
		}
		return nil
	case "fetch":
		fid, err := id(f[1])
		if err != nil {
			return err
		}
		m, err := kv(f[2:])
		if err != nil {
			return err
		}
		max := 0
		if v, ok := m["max"]; ok {
			max, _ = strconv.Atoi(v)
		}
		return s.c.fetch(fid, max)
	case "update":
		fb, err := s.broker(f[1])
		if err != nil {
			return err
		}
		m, err := kv(f[2:])
		if err != nil {
			return err
		}
		off := fb.r.LEO()
		if v, ok := m["offset"]; ok {
			off, _ = strconv.ParseInt(v, 10, 64)
		}
		lb, err := s.c.leader()
		if err != nil {
			return err
		}
		join, err := lb.r.UpdateFollower(fb.id, fb.epoch, off, 0)
		if err != nil {
			return err
		}
		if join {
			return s.c.expand(lb, fb.id)
		}
		return nil
	case "tick":
		d, err := dur(f[1])
		if err != nil {
			return err
		}
		s.c.clock.ns += d
		return nil
	case "shrink":
		lb, err := s.c.leader()
		if err != nil {
			return err
		}
		if p := lb.r.PrepareShrink(); p != nil {
			return s.c.alterISR(lb, p)
		}
		return nil
	case "kill", "crash":
		b, err := s.broker(f[1])
		if err != nil {
			return err
		}
		if err := s.c.stop(b); err != nil {
			return err
		}
		if f[0] == "crash" {
			m, err := kv(f[2:])
			if err != nil {
				return err
			}
			keep, err := strconv.ParseInt(m["keep"], 10, 64)
			if err != nil {
				return fmt.Errorf("crash needs \"keep N\"")
			}
			// Power loss: the page cache beyond keep is gone; the HW
			// checkpoint cannot be newer than what survived.
			return s.c.crashKeep(b, keep)
		}
		return nil
	case "restart":
		i, err := id(f[1])
		if err != nil {
			return err
		}
		b, err := s.c.broker(i)
		if err != nil {
			return err
		}
		if b.alive {
			return fmt.Errorf("broker %d is running", b.id)
		}
		return s.c.restart(b)
	}
	return fmt.Errorf("unknown command %q", f[0])
}

func (s *scriptRun) broker(x string) (*testBroker, error) {
	i, err := id(x)
	if err != nil {
		return nil, err
	}
	b, err := s.c.broker(i)
	if err != nil {
		return nil, err
	}
	if !b.alive {
		return nil, fmt.Errorf("broker %d is down", i)
	}
	return b, nil
}

// query answers the query commands (ok false for any other command).
func (s *scriptRun) query(f []string) (ans string, ok bool, err error) {
	switch f[0] {
	case "consume", "logs", "lost", "asks", "epochs", "lastcaughtup":
	default:
		return "", false, nil
	}
	if s.c == nil {
		return "", true, fmt.Errorf("%s before replicas", f[0])
	}
	arg := func() (*testBroker, error) {
		if len(f) != 2 {
			return nil, fmt.Errorf("%s needs one broker id", f[0])
		}
		return s.broker(f[1])
	}
	switch f[0] {
	case "consume":
		lb, err := s.c.leader()
		if err != nil {
			return "", true, err
		}
		end := FetchEnd(false, false, lb.r.HW(), lb.r.LSO(), lb.r.LEO())
		vals := values(lb)
		start := lb.r.LogStart()
		got := strings.Join(vals[start:end], " ")
		if got == "" {
			got = "nothing"
		}
		return fmt.Sprintf("a consumer of leader %d reads [%d, %d): %s", lb.id, start, end, got), true, nil
	case "logs":
		if len(f) != 2 {
			return "", true, fmt.Errorf("logs needs a broker list")
		}
		l, err := ids(f[1])
		if err != nil {
			return "", true, err
		}
		same, err := s.c.identical(l)
		if err != nil {
			return "", true, err
		}
		var b strings.Builder
		short := true
		for _, x := range l {
			short = short && len(values(s.c.brokers[x])) <= 12
		}
		if short {
			for _, x := range l {
				fmt.Fprintf(&b, "%d: %s\n", x, strings.Join(values(s.c.brokers[x]), " "))
			}
		}
		if same {
			b.WriteString("identical\n")
		} else {
			b.WriteString("diverge\n")
		}
		return b.String(), true, nil
	case "lost":
		n, err := s.c.lost()
		return fmt.Sprintf("lost %d committed offsets", n), true, err
	case "asks":
		b, err := arg()
		if err != nil {
			return "", true, err
		}
		return fmt.Sprintf("broker %d: %d OffsetForLeaderEpoch rounds", b.id, b.asks), true, nil
	case "epochs":
		b, err := arg()
		if err != nil {
			return "", true, err
		}
		var parts []string
		for _, e := range b.r.Epochs().Entries() {
			parts = append(parts, fmt.Sprintf("%d:%d", e.Epoch, e.StartOffset))
		}
		return fmt.Sprintf("broker %d epochs (epoch:start) %s", b.id, strings.Join(parts, ",")), true, nil
	default: // lastcaughtup
		b, err := arg()
		if err != nil {
			return "", true, err
		}
		lb, err := s.c.leader()
		if err != nil {
			return "", true, err
		}
		return fmt.Sprintf("follower %d last caught up at %v", b.id, time.Duration(lb.r.FollowerLastCaughtUp(b.id))), true, nil
	}
}
