package sim

import "testing"

// TestSimulationGroups: the seeds drive the group coordinator through what its invariants
// are about: generations handed out and synced, commits acknowledged and fetched,
// coordinators loading after their partition moved, static members restarting (with the
// old process going on now and then), dynamic members crashing and leaving.
func TestSimulationGroups(t *testing.T) {
	var total GroupStats
	for seed := uint64(1); seed <= 40; seed++ {
		res := Run(Options{Seed: seed})
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		total.add(res.Stats.Groups)
	}
	if total.Generations == 0 || total.Syncs == 0 || total.CommitsAcked == 0 || total.Fetches == 0 {
		t.Errorf("40 seeds: %d generations, %d syncs, %d acknowledged commits, %d offset fetches: want all kinds", total.Generations, total.Syncs, total.CommitsAcked, total.Fetches)
	}
	if total.Loads < 80 || total.StaticRestarts == 0 || total.MemberCrashes == 0 || total.Leaves == 0 {
		t.Errorf("40 seeds: %d coordinator loads, %d static restarts, %d member crashes, %d leaves: want coordinator moves and every kind of member change",
			total.Loads, total.StaticRestarts, total.MemberCrashes, total.Leaves)
	}
	t.Logf("40 seeds: %+v", total)
}
