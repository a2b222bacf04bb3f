package partition

import (
	"slices"
	"testing"
)

// TestQuietFollowerKeepsCaughtUp: a follower that a fetch session leaves out while it is
// caught up (quiet) is recorded at each of the session's fetches through the session's
// clock, as Kafka's leader records every session partition on every fetch: after the leader
// appends, its last caught-up time is the session's last fetch (not the fetch that last named
// the partition), so the ISR keeps it for replica.lag.time.max.ms from there; a follower whose
// session stopped fetching falls out on time.
func TestQuietFollowerKeepsCaughtUp(t *testing.T) {
	const lag = int64(10e9)
	r, _, clk := newLeader(t, 2, Config{ReplicaLagTimeMaxMs: lag / 1e6})
	if _, err := r.AppendAsLeader(oneBatch(1), 1); err != nil {
		t.Fatal(err)
	}
	var clock FetchClock
	clk.ns = 1e9
	_, quiet, err := r.UpdateFollowerQuiet(1, -1, 1, 0, &clock)
	if err != nil || !quiet {
		t.Fatalf("follower at the LEO in the ISR: quiet %v, err %v; want quiet", quiet, err)
	}
	clock.Tick(1e9)
	// The session fetches for 30 s without naming the partition.
	for clk.ns = 2e9; clk.ns <= 31e9; clk.ns += 1e9 {
		clock.Tick(clk.ns)
	}
	clk.ns = 31e9 + 5e6
	if _, err := r.AppendAsLeader(oneBatch(1), 1); err != nil {
		t.Fatal(err)
	}
	if got := r.FollowerLastCaughtUp(1); got != 31e9 {
		t.Fatalf("after the append: follower 1 last caught up at %d, want the session's last fetch 31e9", got)
	}
	if out := r.OutOfSyncReplicas(); out != nil {
		t.Fatalf("out of sync %v right after an append to a quiet partition", out)
	}
	// Detached by the append: the session's later fetches do not count until it names the
	// partition again.
	clock.Tick(32e9)
	clk.ns = 31e9 + lag + 1
	if out := r.OutOfSyncReplicas(); !slices.Equal(out, []int32{1}) {
		t.Fatalf("out of sync %v after replica.lag.time.max.ms without a fetch of the new data, want [1]", out)
	}

	// A follower behind the LEO is not quiet, and one outside the ISR neither.
	if _, quiet, _ := r.UpdateFollowerQuiet(1, -1, 1, 0, &clock); quiet {
		t.Fatal("a follower behind the LEO is quiet")
	}
	// A session that forgets the partition detaches its clock.
	_, quiet, _ = r.UpdateFollowerQuiet(1, -1, 2, 0, &clock)
	if !quiet {
		t.Fatal("a caught-up follower is not quiet")
	}
	r.Unquiet(1, &clock)
	clock.Tick(100e9)
	clk.ns = 101e9
	if _, err := r.AppendAsLeader(oneBatch(1), 1); err != nil {
		t.Fatal(err)
	}
	if got := r.FollowerLastCaughtUp(1); got >= 100e9 {
		t.Fatalf("a forgotten partition took the session's clock: last caught up %d", got)
	}
}
