package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/internal/simflag"
)

// defaultSeeds is how many seeds TestSimulation runs without -sim.seeds: fewer under the
// race detector (every step is real broker code and several times slower there); CI runs
// the full count without it (make sim-ci).
func defaultSeeds() int {
	if raceEnabled {
		return 150
	}
	return 2000
}

// TestSimulation runs the deterministic simulator over many seeds and fails with the seed
// and the end of its trace on the first invariant violation. -sim.seed=N replays one seed
// and prints its whole trace.
func TestSimulation(t *testing.T) {
	if seed := *simflag.Seed; seed != 0 {
		res := Run(Options{Seed: seed, Steps: *simflag.Steps})
		t.Logf("seed %d trace:\n%s", seed, strings.Join(res.Trace, "\n"))
		t.Logf("stats %+v", res.Stats)
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		return
	}
	n := *simflag.Seeds
	if n == 0 {
		n = defaultSeeds()
		if testing.Short() {
			n /= 10
		}
	}
	start := time.Now()
	var total Stats
	for seed := *simflag.First; seed < *simflag.First+uint64(n); seed++ {
		res := Run(Options{Seed: seed, Steps: *simflag.Steps})
		if res.Err != nil {
			tail := res.Trace
			if len(tail) > 80 {
				tail = tail[len(tail)-80:]
			}
			t.Fatalf("seed %d: %v\n(replay: go test ./core/sim -run TestSimulation -sim.seed=%d)\nlast steps:\n%s",
				seed, res.Err, seed, strings.Join(tail, "\n"))
		}
		add(&total, res.Stats)
	}
	t.Logf("%d seeds in %v: %s", n, time.Since(start).Round(time.Millisecond), fmt.Sprintf("%+v", total))
}

// foundSeeds are seeds beyond TestSimulation's range on which a longer soak (make sim
// SEEDS=N, -sim.first) once failed, each run on every change. A change of the simulator
// or of the code may make a seed take another path; the unit test named with it pins the rule.
var foundSeeds = []struct {
	seed uint64
	what string
}{
	{503208, "a fenced transactional process's retry after retention deleted its epoch's marker and a kill: the producer state rebuilt without it opened a transaction no coordinator knew of (core/partition TestLogStartSnapshot)"},
	{516182, "a leader shrank the ISR below min.insync.replicas to itself and crashed (power loss) before the controller committed it: elected again as the last ISR member, it had lost records acknowledged with the removed follower (core/partition TestShrinkBelowMinISRFlushesFirst)"},
	{592912, "a leader's acks=all wait looked at after its term ended answers from that term's HW; the batch, held by both ISR members then, was truncated from the old leader since (the new leader lost power): the check counts the old leader as it held the batch at its HW (core/partition TestAcksAllTiedToTheAppendEpoch)"},
	{575905, "an acknowledged ABORT marker was lost with the partition's last live holder (a log directory failure, then a power loss); the producer's next epoch committed on that partition, and its COMMIT ended the transaction the lost marker had aborted, as in Kafka (core/partition TestTxnOpenAcrossEpochBump): the read_committed check excuses records whose ending marker an excused failure took"},
	{609849, "a leader whose log directory then failed had acknowledged a batch with its follower, which lost it in a power loss; the answer arrived after the new leader acknowledged another record at the same offset: the check of a record acknowledged twice lets the excused one go (recordAck)"},
}

// TestSimulationFound runs foundSeeds.
func TestSimulationFound(t *testing.T) {
	for _, f := range foundSeeds {
		if res := Run(Options{Seed: f.seed}); res.Err != nil {
			t.Errorf("seed %d (found: %s): %v\n(replay: go test ./core/sim -run TestSimulation -sim.seed=%d)", f.seed, f.what, res.Err, f.seed)
		}
	}
}

func add(t *Stats, s Stats) {
	t.Steps += s.Steps
	t.Produced += s.Produced
	t.AckedAll += s.AckedAll
	t.AckedOne += s.AckedOne
	t.Consumed += s.Consumed
	t.Kills += s.Kills
	t.Crashes += s.Crashes
	t.CrashesOutOfSync += s.CrashesOutOfSync
	t.Restarts += s.Restarts
	t.Pauses += s.Pauses
	t.Partitions += s.Partitions
	t.DiskFul += s.DiskFul
	t.ClusterRestarts += s.ClusterRestarts
	t.LeaderMoves += s.LeaderMoves
	t.CtrlCuts += s.CtrlCuts
	t.Correlated += s.Correlated
	t.FetcherResizes += s.FetcherResizes
	t.PartitionAdds += s.PartitionAdds
	t.Rebalances += s.Rebalances
	t.LeaderFlaps += s.LeaderFlaps
	t.ParkedWaits += s.ParkedWaits
	t.MetaFaults += s.MetaFaults
	t.MetaRefused += s.MetaRefused
	t.MetaCrashes += s.MetaCrashes
	t.ConvergedMaxNs = max(t.ConvergedMaxNs, s.ConvergedMaxNs)
	t.FsyncRuns += s.FsyncRuns
	t.PowerLosses += s.PowerLosses
	t.EpochQueued += s.EpochQueued
	t.AlterPartitions += s.AlterPartitions
	t.AlterLost += s.AlterLost
	t.RetentionOn += s.RetentionOn
	t.RetentionDeletes += s.RetentionDeletes
	t.ConsumerResets += s.ConsumerResets
	t.Groups.add(s.Groups)
	t.Txns.add(s.Txns)
}

// TestSimulationFaultMix: the seeds exercise the fault kinds that expose acks tied to the
// wrong leader epoch (finding 5): leaderships that move and soon move back, and acks=all
// waits that their handler looks at only later (a request waiting on its partitions one
// after the other); and retention deleting segments, which the followers' log starts follow.
func TestSimulationFaultMix(t *testing.T) {
	var total Stats
	for seed := uint64(1); seed <= 40; seed++ {
		res := Run(Options{Seed: seed})
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		add(&total, res.Stats)
	}
	if total.LeaderFlaps == 0 || total.ParkedWaits == 0 || total.LeaderMoves <= total.LeaderFlaps {
		t.Errorf("40 seeds: %d leader moves, %d moved back, %d parked acks=all waits: want all kinds", total.LeaderMoves, total.LeaderFlaps, total.ParkedWaits)
	}
	if total.MetaFaults == 0 || total.MetaRefused == 0 || total.MetaCrashes == 0 {
		t.Errorf("40 seeds: %d metadata-log faults, %d changes refused, %d metadata crashes: want all kinds", total.MetaFaults, total.MetaRefused, total.MetaCrashes)
	}
	if total.CrashesOutOfSync == 0 || total.FsyncRuns == 0 || total.PowerLosses == 0 {
		t.Errorf("40 seeds: %d crashes out of sync, %d flush.messages=1 runs, %d power losses of every broker: want all kinds", total.CrashesOutOfSync, total.FsyncRuns, total.PowerLosses)
	}
	if total.EpochQueued == 0 {
		t.Error("40 seeds: no broker incarnation queued its leader-epoch checkpoint writes")
	}
	if total.AlterPartitions == 0 || total.AlterLost == 0 {
		t.Errorf("40 seeds: %d AlterPartition requests, %d lost: want both", total.AlterPartitions, total.AlterLost)
	}
	if total.RetentionDeletes == 0 {
		t.Errorf("40 seeds: no retention pass deleted a segment: the followers' log starts never had to follow")
	}
	t.Logf("40 seeds: %+v", total)
}

// TestSimulationDeterministic: the same seed gives the same trace.
func TestSimulationDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		a, b := Run(Options{Seed: seed}), Run(Options{Seed: seed})
		if x, y := strings.Join(a.Trace, "\n"), strings.Join(b.Trace, "\n"); x != y {
			i := 0
			for i < len(a.Trace) && i < len(b.Trace) && a.Trace[i] == b.Trace[i] {
				i++
			}
			t.Fatalf("seed %d gave two different traces, from step line %d:\n%v\n%v", seed, i, a.Trace[i:min(i+3, len(a.Trace))], b.Trace[i:min(i+3, len(b.Trace))])
		}
	}
}
