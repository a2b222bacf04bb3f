package workloads

import (
	"strings"
	"sync"
	"testing"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/results"
)

// TestDamageFindings: damage reports from broker goroutines become the run's damage_found and
// notes.damage (each report's String), bounded in the note and counted in full.
func TestDamageFindings(t *testing.T) {
	r := newCoreSink()
	var wg sync.WaitGroup
	for i := range maxDamageFindings + 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.onDamage(broker.DamageReport{Broker: 2, Topic: "t", Partition: int32(i), DamageError: log.DamageError{File: "00000000000000000000.log", Offset: 7, Reason: "crc mismatch"}})
		}()
	}
	wg.Wait()
	var res results.Result
	r.damageFindings(&res)
	n := res.Notes["damage"]
	if res.DamageFound != maxDamageFindings+5 || !strings.Contains(n, "broker 2: t-") || !strings.HasSuffix(n, "and 5 more") {
		t.Fatalf("damage %d, note %q", res.DamageFound, n)
	}
	var clean results.Result
	newCoreSink().damageFindings(&clean)
	if clean.DamageFound != 0 || clean.Notes["damage"] != "" {
		t.Fatalf("no damage reported, got %d %q", clean.DamageFound, clean.Notes["damage"])
	}
}
