package sim

import "testing"

// TestSimulationTxns: the seeds drive transactions through what their invariants are about:
// commits and aborts, read_committed reads that return committed transactions, markers
// acknowledged, coordinators loading after their partition moved, producers restarting with
// the same transactional id (zombies going on, then fenced) and transactions abandoned to
// the coordinator's timeout.
func TestSimulationTxns(t *testing.T) {
	var total TxnStats
	for seed := uint64(1); seed <= 60; seed++ {
		res := Run(Options{Seed: seed})
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		total.add(res.Stats.Txns)
	}
	if total.Committed == 0 || total.Aborted == 0 || total.Markers == 0 || total.RecordsRead == 0 {
		t.Errorf("60 seeds: %d commits, %d aborts, %d markers, %d transactional records read_committed: want all kinds", total.Committed, total.Aborted, total.Markers, total.RecordsRead)
	}
	if total.Loads < 80 || total.Zombies == 0 || total.Fenced == 0 || total.Abandoned == 0 || total.Restarts == 0 {
		t.Errorf("60 seeds: %d coordinator loads, %d zombies, %d fenced, %d abandoned, %d restarts: want coordinator moves and every kind of producer change",
			total.Loads, total.Zombies, total.Fenced, total.Abandoned, total.Restarts)
	}
	t.Logf("60 seeds: %+v", total)
}
