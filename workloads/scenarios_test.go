package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// scenario loads an embedded spec in a short form: the sets (duration, warmup, lag times,
// rate) are applied, then the faults that no longer start inside the measurement are dropped.
func scenario(t *testing.T, name string, sets ...string) *spec.Spec {
	t.Helper()
	s, err := spec.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if err := s.Set(k, v); err != nil {
			t.Fatalf("%s: --set %s: %v", name, kv, err)
		}
	}
	var keep []spec.Fault
	for _, f := range s.Faults {
		if f.At < s.Duration {
			keep = append(keep, f)
		}
	}
	s.Faults = keep
	if err := s.Validate(); err != nil {
		t.Fatalf("%s short form: %v", name, err)
	}
	return s
}

// runScenario runs s on the embedded cluster; the table goes to the test log on failure.
func runScenario(t *testing.T, s *spec.Spec) (*results.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var out strings.Builder
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Stdout: &out, Stderr: &out})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", s.Name, out.String())
		}
	})
	if res == nil {
		t.Fatalf("%s: no result: %v", s.Name, err)
	}
	return res, err
}

// faultsReport reads the run's faults.json.
func faultsReport(t *testing.T, res *results.Result) *FaultsReport {
	t.Helper()
	if res.Files.Faults != FaultsReportFile {
		t.Errorf("files.faults = %v", res.Files.Faults)
	}
	fr, err := ReadFaultsReport(filepath.Dir(res.Files.Timeline))
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// shrankOut reports whether, after fault f started, an ISR shrink removed broker id (the
// fault's target) from some partition. It checks why the ISR shrank, not how soon: when the
// rule fires is pinned by core/partition's clock-injected tests, and on a loaded machine the
// ISR check and the 100 ms samples can run late by any amount.
func shrankOut(fr *FaultsReport, f FaultFigures, id int32) bool {
	for _, e := range fr.ISREvents {
		if e.T >= f.AtS && e.Kind == "shrink" && slices.Contains(e.From, id) && !slices.Contains(e.To, id) {
			return true
		}
	}
	return false
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded fault scenario (skipped with -short)")
	}
}

// TestScenarioFollowerPause: the paused follower leaves the ISR (how soon is core/partition's to
// pin, not a loaded machine's), rejoins after the resume, acks=all keeps working and nothing
// acknowledged is lost.
func TestScenarioFollowerPause(t *testing.T) {
	skipShort(t)
	const lag = 1000 * time.Millisecond
	s := scenario(t, "follower-pause", "duration=5s", "warmup=500ms", "rate=400",
		fmt.Sprintf("replica.lag.time.max.ms=%d", lag.Milliseconds()))
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	fr := faultsReport(t, res)
	if len(fr.Faults) != 1 || fr.PartitionsCSV != "partitions.csv" {
		t.Fatalf("report %+v", fr)
	}
	f := fr.Faults[0]
	var paused int32
	if _, err := fmt.Sscanf(f.Target, "broker=%d", &paused); err != nil {
		t.Fatalf("fault target %q: %v", f.Target, err)
	}
	if f.TimeToShrinkS < 0 || !shrankOut(fr, f, paused) {
		t.Errorf("time to shrink %.2fs, ISR events %+v: want broker %d dropped from an ISR after the pause", f.TimeToShrinkS, fr.ISREvents, paused)
	}
	if rejoin := fr.Faults[0].TimeToRejoinS; rejoin < 0 {
		t.Errorf("follower never rejoined the ISR")
	}
	// The heal comes at the end of the short run, the rejoin after it: settle waits (with a
	// deadline) for full ISRs before the timelines take their last samples, so both the
	// brokers' counters and partitions.csv see the expansion however long the rejoin takes.
	if res.ISR.Shrinks < 1 || res.ISR.Expands < 1 || fr.ISRShrinks < 1 || fr.ISRExpands < 1 {
		t.Errorf("isr %+v, partitions.csv %d shrinks %d expands: want a shrink and an expand", res.ISR, fr.ISRShrinks, fr.ISRExpands)
	}
	d := res.Durability
	if d.Acked == 0 || d.Lost != 0 || !d.ReplicasIdentical {
		t.Errorf("durability %+v", d)
	}
	if res.Produced.Errors["NOT_ENOUGH_REPLICAS"] != 0 {
		t.Errorf("acks=all refused with min ISR 2 and one follower paused: %v", res.Produced.Errors)
	}
}

// TestScenarioLeaderKill: a leader killed under acks=all load; a clean election loses nothing.
func TestScenarioLeaderKill(t *testing.T) {
	skipShort(t)
	s := scenario(t, "leader-kill", "duration=4s", "warmup=500ms", "rate=400")
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 1 || res.Faults[0].Error != "" {
		t.Fatalf("faults %+v", res.Faults)
	}
	d := res.Durability
	if d.Acked == 0 || d.Lost != 0 || d.OutOfOrder != 0 || !d.ReplicasIdentical {
		t.Errorf("durability %+v", d)
	}
	if fr := faultsReport(t, res); fr.Faults[0].TimeToShrinkS < 0 || fr.ReplicaLogs == nil || !fr.ReplicaLogs.Identical {
		t.Errorf("the killed leader never left the ISR, or replica logs differ: %+v %+v", fr.Faults, fr.ReplicaLogs)
	}
	// The ISR changes split into the leaders' and the controller's (fencing), adding up.
	if i := res.ISR; i.Shrinks == 0 || i.LeaderShrinks+i.ControllerShrinks != i.Shrinks || i.LeaderShrinks < 0 || i.ControllerShrinks < 0 {
		t.Errorf("isr %+v", i)
	}
}

// TestScenarioConsumerGroup: two group members read the load; the coordinator's broker is
// killed and the members carry on with the coordinator that loads the group from the log.
func TestScenarioConsumerGroup(t *testing.T) {
	skipShort(t)
	s := scenario(t, "consumer-group", "duration=6s", "warmup=500ms", "rate=400", "consumers.auto.commit.interval.ms=500")
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	g := res.Group
	if g == nil || g.ID != "isrbench-group" || g.Members != 2 || g.Source != "coordinator" {
		t.Fatalf("group %+v", g)
	}
	if g.CommittedLag.Count == 0 {
		t.Errorf("no committed-offset lag sample: %+v", g.CommittedLag)
	}
	if len(res.Faults) != 1 || res.Faults[0].Error != "" {
		t.Fatalf("faults %+v", res.Faults)
	}
	if res.E2ELatencyUs.Count == 0 || res.Durability.Lost != 0 {
		t.Errorf("e2e %+v durability %+v", res.E2ELatencyUs, res.Durability)
	}
	if res.Notes["e2e_latency"] != "" {
		t.Errorf("the group did not read up to the HW: %s", res.Notes["e2e_latency"])
	}
}

// TestScenarioMinISR: with both followers down acks=all is refused with NOT_ENOUGH_REPLICAS
// while the acks=1 group keeps being accepted.
func TestScenarioMinISR(t *testing.T) {
	skipShort(t)
	s := scenario(t, "min-isr", "duration=6s", "warmup=500ms", "retries=1") // outage 2.2 s .. 6 s
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Produced.Errors["NOT_ENOUGH_REPLICAS"] == 0 {
		t.Errorf("no NOT_ENOUGH_REPLICAS: errors %v", res.Produced.Errors)
	}
	// The controller drops each killed follower from the ISR of the three partitions: those
	// shrinks are in result.json although no leader's IsrShrinksPerSec counted them.
	if res.ISR.Shrinks < 3 {
		t.Errorf("isr %+v: the fenced followers' ISR removals are not counted", res.ISR)
	}
	fr := faultsReport(t, res)
	if len(fr.ProducerGroups) != 2 || fr.ProducerGroups[1].Acks != "1" || fr.ProducerGroups[1].Errors["NOT_ENOUGH_REPLICAS"] != 0 ||
		fr.ProducerGroups[0].Errors["NOT_ENOUGH_REPLICAS"] == 0 {
		t.Errorf("producer groups %+v", fr.ProducerGroups)
	}
	one := res.Durability.ByAcks["1"]
	all := res.Durability.ByAcks["all"]
	// acks=1 records the killed brokers had acknowledged as leaders (of the other partitions)
	// but not yet replicated may be lost: that is acks=1. acks=all must lose nothing.
	if one.Acked == 0 || all.Lost != 0 || all.Acked == 0 {
		t.Errorf("by acks %+v", res.Durability.ByAcks)
	}
	// acks=1 records meant for the outage were acknowledged: more than the acks=all ones.
	if one.Acked <= all.Acked {
		t.Errorf("acks=1 acked %d <= acks=all acked %d", one.Acked, all.Acked)
	}
}

// TestScenarioUncleanElection: an out-of-sync replica is elected; the loss is counted and
// shown, and the run does not fail.
func TestScenarioUncleanElection(t *testing.T) {
	skipShort(t)
	s := scenario(t, "unclean-election", "duration=6s", "warmup=500ms", "rate=400")
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatalf("unclean election run failed (loss is expected, not an error): %v", err)
	}
	if res.Durability.Lost == 0 {
		t.Errorf("no loss counted: %+v, faults %+v", res.Durability, res.Faults)
	}
	if why, _ := res.Durability.LossExpected, true; !strings.Contains(why, "unclean") {
		t.Errorf("durability.loss_expected = %q", why)
	}
}

// TestScenarioPowerLoss: crashing the whole ISR loses acknowledged records without fsync and
// none with flush.messages=1.
func TestScenarioPowerLoss(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		flush    string
		wantLoss bool
	}{{"9223372036854775807", true}, {"1", false}} {
		t.Run("flush.messages="+tc.flush, func(t *testing.T) {
			s := scenario(t, "power-loss", "duration=5s", "warmup=500ms", "rate=300", "flush.messages="+tc.flush)
			res, err := runScenario(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if lost := res.Durability.Lost; (lost > 0) != tc.wantLoss || res.Durability.Acked == 0 {
				t.Errorf("durability %+v, want loss %v", res.Durability, tc.wantLoss)
			}
		})
	}
}

// TestScenarioKIP101: the follower-restart + failover sequence loses acknowledged records
// with truncate-to-HW and none with leader epochs (whose replica logs end identical). Whether
// hw loses depends on where the kills land against the followers' parked fetches (a follower
// whose fetch returned just before the kill has the leader's HW), so hw gets up to four runs
// to show a loss; epoch must lose nothing in its one run.
func TestScenarioKIP101(t *testing.T) {
	skipShort(t)
	for _, mode := range []string{"epoch", "hw"} {
		t.Run(mode, func(t *testing.T) {
			tries := 1
			if mode == "hw" {
				if raceEnabled {
					// Under the race detector the run's timing hides the ablation's loss
					// (0 of 4 runs lost in CI); core/partition's script tests pin the KIP-101
					// sequence and its hw loss deterministically.
					t.Skip("the hw ablation's loss depends on timing the race detector changes")
				}
				tries = 4
			}
			for try := 1; try <= tries; try++ {
				s := scenario(t, "kip101-truncate-hw", "duration=5s", "warmup=1s", "isrbench.truncate.mode="+mode)
				res, err := runScenario(t, s)
				if err != nil {
					t.Fatal(err)
				}
				d := res.Durability
				if mode == "epoch" && (d.Lost != 0 || !d.ReplicasIdentical || d.Acked == 0) {
					t.Errorf("epoch: durability %+v", d)
				}
				if mode == "epoch" || d.Lost > 0 {
					t.Logf("%s: run %d: durability %+v", mode, try, d)
					return
				}
				t.Logf("hw: run %d of %d lost nothing: %+v, faults %+v", try, tries, d, res.Faults)
			}
			t.Errorf("hw: no acknowledged record lost in %d runs", tries)
		})
	}
}

// TestScenarioCrossDC: the slow link shows in the HW lag (at least a round trip).
func TestScenarioCrossDC(t *testing.T) {
	skipShort(t)
	s := scenario(t, "cross-dc", "duration=3s", "warmup=500ms", "rate=1000")
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if p99 := res.HWLagUs.P99; p99 < 200_000 {
		t.Errorf("hw lag p99 %.0f µs with a 100 ms one-way link, want >= 200 ms", p99)
	}
	if res.Durability.Lost != 0 {
		t.Errorf("durability %+v", res.Durability)
	}
}

// TestRandomFaults runs random kill / restart / pause sequences under acks=all load (RF 3,
// min ISR 2, clean elections): every acknowledged record must be found and the replica logs
// must be identical. ISRBENCH_FAULT_SEEDS=n runs n seeds (default 4).
func TestRandomFaults(t *testing.T) {
	skipShort(t)
	n := 4
	if v := os.Getenv("ISRBENCH_FAULT_SEEDS"); v != "" {
		fmt.Sscan(v, &n)
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			s := randomFaultSpec(t, seed)
			res, err := runScenario(t, s)
			d := res.Durability
			if err != nil || d.Lost != 0 || d.OutOfOrder != 0 || !d.ReplicasIdentical || d.Acked == 0 {
				t.Errorf("seed %d: err %v, durability %+v, replicas note %v\nfaults %+v", seed, err, d,
					res.Notes["durability.replica_logs"], res.Faults)
			}
			if fr := faultsReport(t, res); fr.ReplicaLogs == nil || fr.ReplicaLogs.Checked == 0 || fr.ReplicaLogs.Lost != 0 {
				t.Errorf("seed %d: replica logs %+v", seed, fr.ReplicaLogs)
			}
		})
	}
}

func randomFaultSpec(t *testing.T, seed uint64) *spec.Spec {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 101))
	s := shortSpec(t, "duration=4s", "warmup=300ms", "rate=300", "partitions=3",
		"replica.lag.time.max.ms=500", "broker.session.timeout.ms=1500", "delivery.timeout.ms=60000")
	s.Name = fmt.Sprintf("random-faults-%d", seed)
	targets := []string{"leader-of:isrbench-0", "follower-of:isrbench-1", "any-follower", "leader", "0", "1", "2"}
	kinds := []string{"kill-broker", "pause-broker", "restart-broker", "kill-broker"}
	at := 300 * time.Millisecond
	for i := 0; i < 4 && at < 3*time.Second; i++ {
		f := spec.Fault{At: at, Kind: kinds[rng.IntN(len(kinds))], Target: targets[rng.IntN(len(targets))],
			Partition: rng.IntN(3)}
		if f.Kind != "restart-broker" {
			f.Duration = time.Duration(300+rng.IntN(900)) * time.Millisecond
		}
		s.Faults = append(s.Faults, f)
		at += time.Duration(200+rng.IntN(700)) * time.Millisecond
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("seed %d faults: %+v", seed, s.Faults)
	return s
}

// TestFaultTargets pins the target grammar and its errors.
func TestFaultTargets(t *testing.T) {
	for _, tc := range []struct {
		kind, target string
		want         string // ParsedTarget as text, or an error substring
	}{
		{"pause-broker", "2", "id 2"},
		{"pause-broker", "leader-of:isrbench-3", "leader isrbench 3"},
		{"pause-broker", "follower-of:isrbench-5", "follower isrbench 5"},
		{"kill-broker", "leader-of:__consumer_offsets-12", "leader __consumer_offsets 12"},
		{"pause-broker", "follower-of:my-topic-2", `names topic "my-topic", which the spec does not have (its topic is isrbench: isrbench-0..isrbench-5; or __consumer_offsets-0..__consumer_offsets-49)`},
		{"kill-broker", "leader-of:isrbench-1-0", `names topic "isrbench-1"`},
		{"kill-broker", "any-follower", "any-follower isrbench 1"},
		{"kill-broker", "leader", "leader isrbench 1"},
		{"partition", "0|1,2", "groups [0] [1 2]"},
		{"partition", "0,1|2", "groups [0 1] [2]"},
		{"pause-broker", "0|1", "only kind partition"},
		{"partition", "0|0", "names broker 0 twice"},
		{"partition", "0|5", `"5", not a broker id`},
		{"pause-broker", "7", "broker ids 0..2"},
		{"pause-broker", "leader-of:isrbench", "no TOPIC-PARTITION"},
		{"pause-broker", "leader-of:isrbench-x", "not a partition number"},
		{"pause-broker", "leader-of:isrbench-9", "has 6 partitions"},
		{"pause-broker", "leader-of:__consumer_offsets-50", "has 50 partitions"},
		{"pause-broker", "leader-of:orders-1", `names topic "orders"`},
		{"pause-broker", "boss", "leader-of:TOPIC-PARTITION"},
	} {
		pt, err := spec.ParseFaultTarget("faults[0].target", spec.Fault{Kind: tc.kind, Target: tc.target, Partition: 1}, 3, "isrbench", 6, 50)
		var got string
		switch {
		case err != nil:
			got = err.Error()
			if !strings.Contains(got, "faults[0].target") {
				t.Errorf("%s: error %q does not name the field", tc.target, got)
			}
		case pt.IsGroups():
			got = fmt.Sprintf("groups %v %v", pt.Groups[0], pt.Groups[1])
		case pt.Ref.Role == "id":
			got = fmt.Sprintf("id %d", pt.Ref.ID)
		default:
			got = fmt.Sprintf("%s %s %d", pt.Ref.Role, pt.Ref.Topic, pt.Ref.Partition)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("target %q (%s): got %q, want %q", tc.target, tc.kind, got, tc.want)
		}
	}
}

// TestFaultSpecErrors: fault schedule validation names the field and the allowed values.
func TestFaultSpecErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"faults: [{at: 1s, kind: restart-broker, target: 1, duration: 1s}]\n", "faults[0].duration"},
		{"faults: [{at: 1s, kind: pause-broker, target: 1}]\n", "needs a duration"},
		{"faults: [{at: 1s, duration: 1s, kind: pause-broker, fence: session}]\n", "fence applies only"},
		{"faults: [{at: 1s, kind: kill-broker, fence: later}]\n", "now|session"},
		{"faults: [{at: 1s, duration: 1s, kind: slow-link, jitter: 5ms, bandwidth: 1000}]\n", "jitter"},
		{"producers: []\n", "empty list"},
		{"producers: [{acks: 2}]\n", "producers.acks"},
		{"producers: [{count: 1}, {acks: 5}]\n", "producers[1]"},
	} {
		_, err := spec.Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", tc.yaml, err, tc.want)
		}
	}
	// Aliases and lists parse.
	s, err := spec.Parse([]byte("faults: [{at: 1s, duration: 1s, kind: pause, target: follower-of:isrbench-2}, {at: 2s, kind: kill, fence: session}]\n" +
		"producers: [{count: 1, acks: all}, {count: 2, acks: 1, rate: 100}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Faults[0].Kind != "pause-broker" || s.Faults[1].Kind != "kill-broker" || s.Faults[1].Fence != "session" {
		t.Errorf("faults %+v", s.Faults)
	}
	g := s.ProducerGroups()
	if len(g) != 2 || g[0].Acks != "all" || g[1].Acks != "1" || g[1].Count != 2 || g[1].Rate != 100 {
		t.Errorf("groups %+v", g)
	}
	if c := s.Config(); c["producers.groups"] != 2 || c["producers[1].acks"] != "1" {
		t.Errorf("config %v", c)
	}
}

// TestLossExpected pins when acks=all loss fails a run.
func TestLossExpected(t *testing.T) {
	s := spec.DefaultSpec()
	if lossExpected(s) != "" {
		t.Fatal("default spec expects loss")
	}
	s.Faults = []spec.Fault{{Kind: "crash-broker"}}
	if !strings.Contains(lossExpected(s), "flush.messages") {
		t.Error("crash without fsync")
	}
	if err := s.Set("flush.messages", "1"); err != nil {
		t.Fatal(err)
	}
	if lossExpected(s) != "" {
		t.Error("crash with flush.messages=1 expects loss")
	}
	if err := s.Set("unclean.leader.election.enable", "true"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lossExpected(s), "unclean") {
		t.Error("unclean")
	}
	if !errors.Is(fmt.Errorf("%w: x", ErrDurability), ErrDurability) {
		t.Error("ErrDurability")
	}
}

// TestFaultTimes pins the timeline arithmetic: time to shrink from the first shrink at or
// after the fault, time to rejoin from the first fully replicated sample after its end.
func TestFaultTimes(t *testing.T) {
	pt := &partTimeline{interval: 100 * time.Millisecond,
		events: []ISREvent{
			{T: 0.5, Kind: "expand"},
			{T: 3.3, Kind: "shrink"},
			{T: 7.4, Kind: "expand"},
		},
		full: []fullMark{{T: 0, Full: true}, {T: 3.3, Full: false}, {T: 7.4, Full: true}},
	}
	for _, tc := range []struct {
		at, end              float64
		shrink, rejoin, lead float64
	}{
		{2, 7, 1.3, 0.4, 0.3},       // pause 2..7: shrink 1.3 s after, full again 0.4 s after the end
		{2, 0, 1.3, 5.4, 0.3},       // instantaneous at 2: full again at 7.4
		{8, 8.5, -1, 0, 0},          // nothing happened: fully replicated at the end
		{3.35, 3.36, -1, 4.04, 0.3}, // no shrink after 3.35
	} {
		ft := pt.faultTimes(tc.at, tc.end)
		if !near(ft.ShrinkAfterS, tc.shrink) || !near(ft.RejoinAfterS, tc.rejoin) {
			t.Errorf("faultTimes(%v, %v) = %+v, want shrink %v rejoin %v", tc.at, tc.end, ft, tc.shrink, tc.rejoin)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestScenarioNetworkPartition: broker 0 is cut off from brokers 1 and 2 (replica traffic
// only): the followers on each side leave the ISRs after the lag time, come back after the
// heal, and with min ISR 2 acks=all loses nothing.
func TestScenarioNetworkPartition(t *testing.T) {
	skipShort(t)
	s, err := spec.Parse([]byte(`name: network-partition
topic: {partitions: 3, min.insync.replicas: 2}
broker: {replica.lag.time.max.ms: 500, replica.fetch.wait.max.ms: 100}
producers: {count: 1, acks: all, rate: 300, delivery.timeout.ms: 60000}
duration: 3s
warmup: 300ms
faults:
  - {at: 500ms, duration: 1500ms, kind: partition, target: "0|1,2"}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := runScenario(t, s)
	if err != nil {
		t.Fatal(err)
	}
	fr := faultsReport(t, res)
	if len(fr.Faults) != 1 || fr.Faults[0].Target != "links=[0]<->[1 2]" {
		t.Fatalf("faults %+v", fr.Faults)
	}
	// Broker 0 cut off from 1 and 2: it leaves the ISRs that 1 or 2 lead (speed-independent:
	// shrankOut).
	if f := fr.Faults[0]; f.TimeToShrinkS < 0 || !shrankOut(fr, f, 0) || f.TimeToRejoinS < 0 {
		t.Errorf("fault figures %+v, ISR events %+v: want broker 0 dropped from an ISR and a rejoin", f, fr.ISREvents)
	}
	if d := res.Durability; d.Acked == 0 || d.Lost != 0 || !d.ReplicasIdentical {
		t.Errorf("durability %+v", d)
	}
}
