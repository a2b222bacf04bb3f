package sim

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// fault injects or heals one fault: half of the time it heals one (a restart, a resume, a
// mended link or disk), so the cluster spends time both under faults and back in sync.
func (s *Sim) fault() {
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	if s.rng.IntN(2) == 0 {
		s.healOne(n)
		return
	}
	if s.crashPending && s.rng.IntN(5) != 0 {
		// Mostly spare the other brokers while a crashed one catches up, so that crashes
		// are checked for loss and not excused as correlated failures (rule 2 of excuse.go).
		s.healOne(n)
		return
	}
	switch r := s.rng.IntN(100); {
	case r < 14:
		if n.up() {
			s.kill(n, s.rng.IntN(2) == 0)
		}
	case r < 24:
		// A power loss, in sync or not: what only n held is excused (excuse.go).
		if n.up() {
			s.crash(n)
		}
	case r < 40:
		if !n.up() {
			s.restart(n)
		}
	case r < 48:
		if n.up() && !n.paused {
			s.failure(fmt.Sprintf("broker %d paused", n.id), n.id)
			n.paused = true
			n.b.Pause()
			s.stats.Pauses++
			s.tracef("broker %d paused", n.id)
		} else if n.up() && n.paused {
			s.resume(n)
		}
	case r < 58:
		m := s.nodes[s.rng.IntN(len(s.nodes))]
		if m != n {
			k := pair(n.id, m.id)
			s.cut[k] = !s.cut[k]
			if s.cut[k] {
				s.stats.Partitions++
			}
			s.tracef("network between %d and %d: cut=%v", n.id, m.id, s.cut[k])
		}
	case r < 64:
		m := s.nodes[s.rng.IntN(len(s.nodes))]
		if m != n {
			k := pair(n.id, m.id)
			if s.slow[k] == 0 {
				s.slow[k] = int64(50+s.rng.IntN(400)) * int64(time.Millisecond)
			} else {
				s.slow[k] = 0
			}
			s.tracef("link %d-%d extra delay %v", n.id, m.id, time.Duration(s.slow[k]))
		}
	case r < 70:
		n.ctrlCut = !n.ctrlCut
		if n.ctrlCut {
			s.stats.CtrlCuts++
			s.failure(fmt.Sprintf("broker %d cut from the controller", n.id), n.id)
		}
		s.tracef("broker %d cut from the controller: %v", n.id, n.ctrlCut)
	case r < 77:
		p := int32(s.rng.IntN(s.nparts))
		if st, ok := s.ctrl.Partition(topic, p); ok && len(st.ISR) > 1 {
			to := st.ISR[s.rng.IntN(len(st.ISR))]
			if _, err := s.ctrl.TransferLeader(topic, p, to); err == nil {
				s.stats.LeaderMoves++
				s.tracef("leader of p%d moved to %d", p, to)
				if from := st.Leader; from != controller.NoLeader && s.rng.IntN(2) == 0 {
					// A flapping leadership: it moves back soon (the old leader follows
					// meanwhile, and may truncate what the new one lacks).
					s.at(s.now+int64(20+s.rng.IntN(500))*int64(time.Millisecond), func() {
						if _, err := s.ctrl.TransferLeader(topic, p, from); err == nil {
							s.stats.LeaderMoves++
							s.stats.LeaderFlaps++
							s.tracef("leader of p%d moved back to %d", p, from)
						}
					})
				}
			}
		}
	case r < 83:
		if n.up() && !n.diskFull {
			s.failure(fmt.Sprintf("broker %d disk full", n.id), n.id)
			n.diskFull = true
			n.fs.SetCapacity(n.fs.Used())
			s.stats.DiskFul++
			s.tracef("broker %d disk full", n.id)
		} else if n.diskFull {
			n.diskFull = false
			n.fs.SetCapacity(0)
			s.tracef("broker %d disk has room again", n.id)
			if n.up() && n.b.LogDirOffline() != nil {
				s.kill(n, false)
			}
		}
	case r < 87:
		if s.rng.IntN(3) == 0 {
			s.restartCluster()
		}
	case r < 91:
		// num.replica.fetchers changed at run time: the brokers move partitions between
		// fetchers when they learn of it, with rounds in flight.
		k := 1 + s.rng.IntN(4)
		if err := s.ctrl.ChangeBrokerConfig("", controller.ConfigChange{Set: map[string]string{"num.replica.fetchers": fmt.Sprint(k)}}); err != nil {
			if !s.refused(err) {
				s.fail("num.replica.fetchers=%d: %v", k, err)
			}
			return
		}
		s.stats.FetcherResizes++
		s.tracef("num.replica.fetchers set to %d", k)
	case r < 94:
		if s.nparts < maxPartitions {
			if _, err := s.ctrl.CreatePartitions(topic, int32(s.nparts+1), nil, false); err == nil {
				s.nparts++
				s.consumer = append(s.consumer, 0)
				s.stats.PartitionAdds++
				s.tracef("partition p%d added", s.nparts-1)
			} else {
				s.tracef("create partition p%d refused: %v", s.nparts, err)
			}
		}
	case r < 96:
		if moved := s.ctrl.BalanceLeaders(10); len(moved) > 0 {
			s.stats.Rebalances++
			s.tracef("preferred leaders elected: %v", moved)
		}
	case r < 97:
		s.metadataFault()
	case r < 99:
		s.toggleRetention()
	default:
		s.ctrl.CheckSessions()
	}
}

// metadataFault makes the controller's metadata log unwritable (a full disk, or an I/O error
// on every write or fsync), or mends it. Meanwhile every metadata change is refused and
// rolled back: no election, ISR change, fencing or registration takes effect, so brokers
// keep their last state and nothing acknowledged may be lost.
func (s *Sim) metadataFault() {
	if s.metaFault != "" {
		s.mendMetadata()
		return
	}
	s.stats.MetaFaults++
	switch s.rng.IntN(3) {
	case 0:
		s.metaFault = "full"
		s.ctrlFS.SetCapacity(s.ctrlFS.Used())
	default:
		op := vfs.OpSync
		if s.rng.IntN(2) == 0 {
			op = vfs.OpWrite
		}
		s.metaFault = "EIO on " + string(op)
		s.ctrlFS.SetInjector(func(o vfs.Op, _ string) error {
			if o == op {
				return syscall.EIO
			}
			return nil
		})
	}
	s.tracef("metadata log: %s", s.metaFault)
}

func (s *Sim) mendMetadata() {
	if s.metaFault == "" {
		return
	}
	s.tracef("metadata log mended (was %s)", s.metaFault)
	s.metaFault = ""
	s.ctrlFS.SetCapacity(0)
	s.ctrlFS.SetInjector(nil)
}

// refused reports whether err is the controller refusing a change because its metadata log
// cannot be written, which only a metadata fault may cause.
func (s *Sim) refused(err error) bool {
	if !errors.Is(err, controller.ErrMetadataLog) {
		return false
	}
	if s.metaFault == "" {
		s.fail("a metadata change was refused without a metadata fault: %v", err)
	}
	s.stats.MetaRefused++
	s.tracef("refused: %v", err)
	return true
}

// crashMetadata is a power loss of the controller's disk during a cluster restart: the
// metadata log keeps what was fsynced; sometimes a torn append is left at the end of a copy
// (bytes that never completed a record) or a bit of one copy of a metadata file flips. Every
// change brokers heard of was fsynced in both copies, so the reopened controller must have
// each of them.
func (s *Sim) crashMetadata() {
	s.ctrlFS = s.ctrlFS.CrashClone()
	s.stats.MetaCrashes++
	ents, err := s.ctrlFS.ReadDir("/metadata")
	if err != nil || len(ents) == 0 {
		return
	}
	e := ents[s.rng.IntN(len(ents))]
	path := "/metadata/" + e.Name()
	f, err := s.ctrlFS.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		s.fail("metadata crash: %v", err)
		return
	}
	defer f.Close()
	fi, err := s.ctrlFS.Stat(path)
	if err != nil {
		s.fail("metadata crash: %v", err)
		return
	}
	switch s.rng.IntN(3) {
	case 0:
		if !strings.Contains(e.Name(), ".log") {
			return
		}
		// What a crash leaves of an append: a frame (4-byte length, 4-byte checksum, the
		// batch) cut short, or whole but with pages never written (zeros).
		n := 20 + s.rng.IntN(400)
		torn := make([]byte, 8+n)
		torn[0], torn[1], torn[2], torn[3] = 0, 0, byte(n>>8), byte(n)
		for i := 4; i < len(torn); i++ {
			torn[i] = byte(1 + s.rng.IntN(255))
		}
		if s.rng.IntN(2) == 0 {
			torn = torn[:s.rng.IntN(len(torn))]
		} else {
			z := 8 + s.rng.IntN(n)
			clear(torn[z:min(len(torn), z+1+s.rng.IntN(64))])
		}
		if _, err := f.WriteAt(torn, fi.Size()); err == nil {
			s.tracef("metadata crash: a torn append of %d bytes at the end of %s", len(torn), path)
		}
	case 1:
		if fi.Size() == 0 {
			return
		}
		off := int64(s.rng.IntN(int(fi.Size())))
		b := []byte{0}
		if _, err := f.ReadAt(b, off); err != nil {
			s.fail("metadata crash: read %s: %v", path, err)
			return
		}
		b[0] ^= 1 << s.rng.IntN(8)
		if _, err := f.WriteAt(b, off); err == nil {
			s.tracef("metadata crash: a bit flipped in %s at offset %d", path, off)
		}
	}
	if err := f.Sync(); err != nil {
		s.fail("metadata crash: fsync %s: %v", path, err)
	}
}

// toggleRetention sets the topic's retention.bytes to retentionBytes, or back to unlimited:
// the brokers' retention passes (work) then delete their oldest segments below their HW,
// the followers' log starts follow their leader's, and consumers behind a log start move up
// to it.
func (s *Sim) toggleRetention() {
	ch := controller.ConfigChange{Delete: []string{controller.ConfigRetentionBytes}}
	if !s.retention {
		ch = controller.ConfigChange{Set: map[string]string{controller.ConfigRetentionBytes: fmt.Sprint(retentionBytes)}}
	}
	if err := s.ctrl.ChangeTopicConfig(topic, ch); err != nil {
		if !s.refused(err) {
			s.fail("retention.bytes: %v", err)
		}
		return
	}
	s.retention = !s.retention
	if s.retention {
		s.retentionUsed = true
		s.stats.RetentionOn++
	}
	s.tracef("topic retention.bytes limited to %d: %v", retentionBytes, s.retention)
}

func (s *Sim) kill(n *node, fence bool) {
	s.failure(fmt.Sprintf("broker %d killed", n.id), n.id)
	s.goingDown(n, false)
	n.b.Kill()
	n.b = nil
	s.stats.Kills++
	if fence {
		s.ctrl.BrokerDown(n.id)
	}
	s.tracef("broker %d killed (fenced at once: %v)", n.id, fence)
}

// crash is a power loss of one broker: it loses what it did not fsync (its whole page cache;
// with fsyncAll nothing acknowledged). The records only it held are excused (rule 1 of
// excuse.go); until the cluster is back in sync, further failures are checked by rule 2.
func (s *Sim) crash(n *node) {
	if !s.crashSafe() {
		s.stats.CrashesOutOfSync++
	}
	if !s.fsyncAll {
		s.excuse(fmt.Sprintf("broker %d crashed", n.id), []int32{n.id})
	}
	s.goingDown(n, true)
	if err := n.b.Crash(); err != nil {
		s.fail("crash broker %d: %v", n.id, err)
	}
	n.b = nil
	s.stats.Crashes++
	if !s.fsyncAll {
		s.crashPending = true
	}
	s.tracef("broker %d crashed (power loss)", n.id)
}

func (s *Sim) restart(n *node) {
	s.stats.Restarts++
	s.start(n)
}

func (s *Sim) resume(n *node) {
	n.paused = false
	n.b.Resume()
	held := n.held
	n.held = nil
	s.tracef("broker %d resumed (%d held deliveries)", n.id, len(held))
	for _, fn := range held {
		fn()
	}
}

// restartCluster kills every broker and the controller (as kill -9 of `isrbench serve`),
// reopens the controller from its metadata log and starts every broker again.
func (s *Sim) restartCluster() {
	s.stats.ClusterRestarts++
	all := make([]int32, len(s.nodes))
	for i, n := range s.nodes {
		all[i] = n.id
	}
	s.failure("a cluster restart", all...)
	s.tracef("cluster restart")
	if s.fsyncAll && s.rng.IntN(4) != 0 { // (three times in four: the rest are kill -9s)
		s.crashAll()
	}
	for _, n := range s.nodes {
		if n.up() {
			s.goingDown(n, false)
			n.b.Kill()
			n.b = nil
		}
		n.diskFull = false
		n.fs.SetCapacity(0)
	}
	s.ctrl.Close()
	s.mendMetadata()
	if s.rng.IntN(2) == 0 {
		s.crashMetadata()
	}
	s.openController()
	if s.err != nil {
		return
	}
	if ps, ok := s.ctrl.Partitions(topic); !ok || len(ps) != s.nparts {
		s.fail("after a cluster restart the topic has %d partitions (exists %v), want %d", len(ps), ok, s.nparts)
		return
	}
	for _, n := range s.nodes {
		s.start(n)
	}
}

// healOne ends one fault of n, if it has one.
func (s *Sim) healOne(n *node) {
	switch {
	case !n.up():
		s.restart(n)
	case n.paused:
		s.resume(n)
	case n.ctrlCut:
		n.ctrlCut = false
		s.tracef("broker %d reaches the controller again", n.id)
	case n.diskFull:
		n.diskFull = false
		n.fs.SetCapacity(0)
		s.tracef("broker %d disk has room again", n.id)
		if n.b.LogDirOffline() != nil {
			s.kill(n, false)
		}
	default:
		for _, m := range s.nodes {
			if k := pair(n.id, m.id); s.cut[k] {
				delete(s.cut, k)
				s.tracef("network between %d and %d mended", k[0], k[1])
				return
			}
		}
	}
}

// crashSafe reports whether a power loss of one broker may not lose an acknowledged record:
// every broker runs and every partition has all its replicas in the ISR, so every record
// acknowledged with acks=all is in the page cache of every replica, and a crash loses it
// from one of them only.
func (s *Sim) crashSafe() bool {
	for _, n := range s.nodes {
		if !n.up() || n.b.LogDirOffline() != nil {
			return false
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok || st.Leader == controller.NoLeader || len(st.ISR) != len(st.Replicas) {
			return false
		}
	}
	return true
}

// operatorElections handles partitions left offline because every ISR member lost data:
// the safe outcome of a correlated failure (the damaged replicas do not lead). An operator
// would elect a leader uncleanly (kafka-leader-election --election-type unclean), which the
// simulator does then; without a correlated failure such a partition is a bug.
func (s *Sim) operatorElections() {
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok || st.Leader != controller.NoLeader {
			continue
		}
		dmg := s.ctrl.Damaged(topic, p)
		if !slices.ContainsFunc(st.ISR, func(id int32) bool { return !slices.Contains(dmg, id) }) {
			if !s.lossy[p] {
				s.fail("p%d is offline: every ISR member %v is damaged %v, without a failure that excuses it", p, st.ISR, dmg)
				return
			}
			if _, err := s.ctrl.ElectLeader(topic, p, true); err == nil {
				s.tracef("operator: unclean election of p%d (ISR %v all damaged after a correlated failure)", p, st.ISR)
			}
		}
	}
}

// heal ends every fault so the cluster can converge.
func (s *Sim) heal() {
	s.tracef("healing every fault")
	clear(s.cut)
	clear(s.slow)
	s.mendMetadata()
	for _, n := range s.nodes {
		n.ctrlCut = false
		if n.diskFull || (n.up() && n.b.LogDirOffline() != nil) {
			n.diskFull = false
			n.fs.SetCapacity(0)
			if n.up() {
				s.kill(n, false)
			}
		}
		if n.up() && n.paused {
			s.resume(n)
		}
		if !n.up() {
			s.restart(n)
		}
	}
}
