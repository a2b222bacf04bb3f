package broker

import (
	"testing"
)

// TestTxnGuardPerProducer: a verified batch is refused only for a marker of its own producer
// on its partition written after its verification began (Kafka's VerificationGuard is per
// producer); another producer's marker on the same partition, the common case with several
// transactional producers, does not refuse it. The guard's map stays bounded.
func TestTxnGuardPerProducer(t *testing.T) {
	var g txnGuard
	mine, other := txnGuardKey{topic: "t", pid: 1}, txnGuardKey{topic: "t", pid: 2}
	g.mu.Lock()
	g.markedLocked(mine) // before the verification: irrelevant
	g.mu.Unlock()
	start := g.begin()
	g.mu.Lock()
	g.markedLocked(other)
	if g.staleLocked(mine, start) {
		t.Fatal("another producer's marker on the partition refused the batch")
	}
	g.markedLocked(txnGuardKey{topic: "t", partition: 1, pid: 1})
	if g.staleLocked(mine, start) {
		t.Fatal("the producer's marker on another partition refused the batch")
	}
	g.markedLocked(mine)
	if !g.staleLocked(mine, start) {
		t.Fatal("the producer's own marker after the verification began did not refuse the batch")
	}
	g.endLocked(start)
	for pid := int64(0); pid < 100000; pid++ {
		g.markedLocked(txnGuardKey{topic: "t", pid: pid})
	}
	if n := len(g.last); n > 2048 {
		t.Errorf("%d entries kept with no verification in flight", n)
	}
	if len(g.inflight) != 0 {
		t.Errorf("verifications in flight after their end: %v", g.inflight)
	}
	g.mu.Unlock()
	// An entry a verification in flight needs survives the pruning.
	start = g.begin()
	g.mu.Lock()
	g.markedLocked(mine)
	for pid := int64(1000000); pid < 1100000; pid++ {
		g.markedLocked(txnGuardKey{topic: "t", pid: pid})
	}
	if !g.staleLocked(mine, start) {
		t.Fatal("pruning dropped the marker a verification in flight needs")
	}
	g.mu.Unlock()
}
