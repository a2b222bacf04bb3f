package broker

import (
	"context"
	"sort"
	"testing"
	"time"
)

// TestStaggerPhase: the brokers of a cluster get phases spread over the interval (no two
// of IDs 0..2 closer than a fifth of it, none of 0..9 equal), inside [0, interval), and
// none with the setting off.
func TestStaggerPhase(t *testing.T) {
	const iv = 5 * time.Second
	var ph []time.Duration
	for id := int32(0); id < 10; id++ {
		p := staggerPhase(id, iv)
		if p < 0 || p >= iv {
			t.Fatalf("broker %d: phase %v outside [0, %v)", id, p, iv)
		}
		ph = append(ph, p)
	}
	first3 := append([]time.Duration(nil), ph[:3]...)
	sort.Slice(first3, func(i, j int) bool { return first3[i] < first3[j] })
	for i := 1; i < 3; i++ {
		if d := first3[i] - first3[i-1]; d < iv/5 {
			t.Errorf("brokers 0..2: phases %v: two within %v", ph[:3], d)
		}
	}
	if d := iv - first3[2] + first3[0]; d < iv/5 {
		t.Errorf("brokers 0..2: phases %v: wrap-around gap %v", ph[:3], d)
	}
	seen := map[time.Duration]bool{}
	for id, p := range ph {
		if seen[p] {
			t.Errorf("broker %d: phase %v shared", id, p)
		}
		seen[p] = true
	}
	on := &Broker{cfg: Config{ID: 1, HousekeepingStagger: true}}
	off := &Broker{cfg: Config{ID: 1}}
	if on.housekeepingPhase(iv) != staggerPhase(1, iv) || off.housekeepingPhase(iv) != 0 {
		t.Errorf("housekeepingPhase: on %v off %v", on.housekeepingPhase(iv), off.housekeepingPhase(iv))
	}
}

// TestPhasedTicker: the first tick comes at the phase, then one per interval; a phase of 0
// (broker 0, or the setting off) ticks first after one interval. Waits on the ticks with a
// deadline; no timing assertion.
func TestPhasedTicker(t *testing.T) {
	for _, phase := range []time.Duration{0, time.Millisecond} {
		p := newPhasedTicker(2*time.Millisecond, phase)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for i := 0; i < 3; i++ {
			select {
			case <-p.C():
				p.fired()
			case <-ctx.Done():
				t.Fatalf("phase %v: tick %d never came", phase, i)
			}
		}
		if p.tick == nil {
			t.Errorf("phase %v: the periodic ticker did not start after the first tick", phase)
		}
		p.Stop()
		cancel()
	}
}
