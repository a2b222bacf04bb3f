package partition

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestScripts runs the scenario scripts in testdata/*.txt. Each script is a
// story, one command per line ("#" starts a comment):
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
//	fail <command>                the command must fail
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
//	expect hw [broker] 7          (default broker: the leader)
//	expect leo 1 9 | isr 0,1 | leader 1 epoch 2 | identical 0,1 |
//	       diverge 0,1 | lost 3 | asks 1 2 | epochs 1 0:0,2:5 | lastcaughtup 1 2s
//
// Any command may end with "at 100ms" (absolute clock). After every command
// the invariants are checked: HW <= LEO on every live replica, the leader's HW
// never decreases, the replicas have the controller's state and its leader
// leads that leader epoch.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			for _, v := range []struct {
				mode    string
				realLog bool
			}{{HWUpdateAtomic, false}, {HWUpdateMutex, false}, {HWUpdateAtomic, true}} {
				runScript(t, f, v.mode, v.realLog)
			}
		})
	}
}

type scriptRun struct {
	t       *testing.T
	file    string
	line    int
	hwMode  string
	realLog bool
	cfg     Config
	c       *testCluster
	cfgSeen bool
}

func runScript(t *testing.T, file, hwMode string, realLog bool) {
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	s := &scriptRun{t: t, file: file, hwMode: hwMode, realLog: realLog}
	s.cfg.HWUpdate = hwMode
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		s.line++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if err := s.exec(line); err != nil {
			t.Fatalf("%s:%d (hw.update=%s realLog=%v): %q: %v", file, s.line, hwMode, realLog, line, err)
		}
	}
}

func (s *scriptRun) exec(line string) error {
	if rest, ok := strings.CutPrefix(line, "repeat "); ok {
		n, body, ok := strings.Cut(rest, ":")
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil {
			return fmt.Errorf("want \"repeat N: cmd; cmd\"")
		}
		for i := 0; i < count; i++ {
			for _, cmd := range strings.Split(body, ";") {
				if cmd = strings.TrimSpace(cmd); cmd != "" {
					if err := s.exec(cmd); err != nil {
						return fmt.Errorf("repeat %d: %q: %w", i, cmd, err)
					}
				}
			}
		}
		return nil
	}
	f := strings.Fields(line)
	if n := len(f); n >= 2 && f[n-2] == "at" {
		at, err := dur(f[n-1])
		if err != nil {
			return err
		}
		if s.c == nil || at < s.c.clock.ns {
			return fmt.Errorf("at %s: clock cannot go backwards", f[n-1])
		}
		s.c.clock.ns = at
		f = f[:n-2]
	}
	if f[0] == "fail" {
		if len(f) < 2 {
			return fmt.Errorf("fail what?")
		}
		if err := s.do(f[1:]); err == nil {
			return fmt.Errorf("%s succeeded, want an error", strings.Join(f[1:], " "))
		}
	} else if err := s.do(f); err != nil {
		return err
	}
	if s.c != nil {
		return s.c.check()
	}
	return nil
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
	case "expect":
		return s.expect(f[1:])
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

func (s *scriptRun) expect(f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("expect what?")
	}
	num := func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
	target := func() (*testBroker, string, error) {
		if len(f) == 3 {
			b, err := s.broker(f[1])
			return b, f[2], err
		}
		b, err := s.c.leader()
		return b, f[1], err
	}
	switch f[0] {
	case "hw", "leo":
		b, v, err := target()
		if err != nil {
			return err
		}
		want, err := num(v)
		if err != nil {
			return err
		}
		got := b.r.HW()
		if f[0] == "leo" {
			got = b.r.LEO()
		}
		if got != want {
			return fmt.Errorf("broker %d %s = %d, want %d", b.id, f[0], got, want)
		}
	case "isr":
		want, err := ids(f[1])
		if err != nil {
			return err
		}
		lb, err := s.c.leader()
		if err != nil {
			return err
		}
		if got := lb.r.ISR(); !slices.Equal(got, want) {
			return fmt.Errorf("ISR %v, want %v", got, want)
		}
	case "leader":
		l, err := id(f[1])
		if err != nil {
			return err
		}
		lb, err := s.c.leader()
		if err != nil {
			return err
		}
		if lb.id != l || !lb.r.IsLeader() {
			return fmt.Errorf("leader %d (IsLeader=%v), want %d", lb.id, lb.r.IsLeader(), l)
		}
		if len(f) == 4 && f[2] == "epoch" {
			e, _ := id(f[3])
			if lb.r.LeaderEpoch() != e {
				return fmt.Errorf("leader epoch %d, want %d", lb.r.LeaderEpoch(), e)
			}
		}
	case "identical", "diverge":
		l, err := ids(f[1])
		if err != nil {
			return err
		}
		same, err := s.c.identical(l)
		if err != nil {
			return err
		}
		if same != (f[0] == "identical") {
			var desc []string
			for _, x := range l {
				desc = append(desc, fmt.Sprintf("%d:%v", x, values(s.c.brokers[x])))
			}
			return fmt.Errorf("logs identical=%v, want %s: %s", same, f[0], strings.Join(desc, " "))
		}
	case "lost":
		want, err := num(f[1])
		if err != nil {
			return err
		}
		got, err := s.c.lost()
		if err != nil {
			return err
		}
		if int64(got) != want {
			return fmt.Errorf("lost %d committed offsets, want %d", got, want)
		}
	case "asks":
		b, v, err := target()
		if err != nil {
			return err
		}
		want, err := num(v)
		if err != nil {
			return err
		}
		if int64(b.asks) != want {
			return fmt.Errorf("broker %d sent %d OffsetForLeaderEpoch requests, want %d", b.id, b.asks, want)
		}
	case "epochs":
		b, v, err := target()
		if err != nil {
			return err
		}
		var parts []string
		for _, e := range b.r.Epochs().Entries() {
			parts = append(parts, fmt.Sprintf("%d:%d", e.Epoch, e.StartOffset))
		}
		if got := strings.Join(parts, ","); got != v {
			return fmt.Errorf("broker %d epochs %s, want %s", b.id, got, v)
		}
	case "lastcaughtup":
		lb, err := s.c.leader()
		if err != nil {
			return err
		}
		fid, err := id(f[1])
		if err != nil {
			return err
		}
		want, err := dur(f[2])
		if err != nil {
			return err
		}
		if got := lb.r.FollowerLastCaughtUp(fid); got != want {
			return fmt.Errorf("follower %d lastCaughtUp %v, want %v", fid, got, want)
		}
	default:
		return fmt.Errorf("unknown expectation %q", f[0])
	}
	return nil
}
