package partition

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestExpireProducers: producer.id.expiration.ms on the leader and a follower. A producer is
// forgotten once its last batch's timestamp is expirationMs old, not a millisecond before;
// one with a transaction open is kept until its marker, and then timed from the marker's
// timestamp; one with no timestamp is timed from the first check; one in the middle of an
// append is kept until the next check. A forgotten producer's retry of an old batch is
// appended again (it is unknown: KIP-360), as in Kafka.
func TestExpireProducers(t *testing.T) {
	const exp = 100
	leader := realLeader(t)
	follower := realReplica(t, t.TempDir(), 1)
	if err := follower.MakeFollower(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	known := func(r *Replica, pid int64) bool { _, ok := r.Producer(pid); return ok }
	expire := func(now int64, want int) {
		t.Helper()
		for _, r := range []*Replica{leader, follower} {
			if got := r.ExpireProducers(now, exp); got != want {
				t.Fatalf("broker %d at %d ms: %d producers expired, want %d", r.BrokerID(), now, got, want)
			}
		}
	}
	mustAppend(t, leader, pidBatchAt(7, 0, 0, 1, "a", 900))
	first := mustAppend(t, leader, pidBatchAt(7, 0, 1, 1, "b", 1000))
	mustAppend(t, leader, txnBatchAt(8, 0, 0, 1, "t", 1000))
	mustAppend(t, leader, pidBatchAt(9, 0, 0, 1, "u", -1)) // no timestamp
	replicate(t, leader, follower)

	expire(1000+exp-1, 0) // producer 9's clock starts here
	for _, pid := range []int64{7, 8, 9} {
		if !known(leader, pid) || !known(follower, pid) {
			t.Fatalf("producer %d forgotten before its time", pid)
		}
	}
	expire(1000+exp, 1)
	if known(leader, 7) || known(follower, 7) {
		t.Fatal("producer 7 still known after producer.id.expiration.ms")
	}
	if !known(leader, 8) {
		t.Fatal("producer 8 forgotten with its transaction open")
	}
	// Forgotten, its retry of the batch at first is a new producer's first batch.
	info, err := leader.AppendAsLeader(pidBatchAt(7, 0, 1, 1, "b", 1000), 1)
	if err != nil || info.Batches != 1 || info.FirstOffset == first {
		t.Fatalf("retry of an expired producer's batch: %+v %v, want appended anew", info, err)
	}
	replicate(t, leader, follower)
	// The retry carries the batch's timestamp (1000): producer 7 is past its time again at
	// the next check; producer 9 (no timestamp) goes exp after the check that first saw it.
	expire(1000+2*exp-2, 1)
	expire(1000+2*exp-1, 1)
	if known(leader, 9) || known(follower, 9) {
		t.Fatal("producer 9 still known")
	}

	// The transaction ends at 5000: producer 8 is timed from the marker.
	if _, err := leader.AppendMarkerAsLeader(8, 0, 0, true, 5000); err != nil {
		t.Fatal(err)
	}
	replicate(t, leader, follower)
	expire(5000+exp-1, 0)
	// In the middle of an append (its appendMu held), it is kept until the next check.
	e := leader.producers.producers[8]
	e.appendMu.Lock()
	if got := leader.ExpireProducers(5000+exp, exp); got != 0 {
		t.Fatalf("leader: %d expired with producer 8's append under way, want 0", got)
	}
	e.appendMu.Unlock()
	if got := follower.ExpireProducers(5000+exp, exp); got != 1 {
		t.Fatalf("follower: %d expired at the marker's time + expiration, want 1", got)
	}
	if got := leader.ExpireProducers(5000+exp, exp); got != 1 || known(leader, 8) {
		t.Fatalf("leader, next check: %d expired, producer 8 known %v", got, known(leader, 8))
	}
}

// TestExpireProducersAfterReopen: the snapshot a clean Close writes keeps each producer's last
// timestamp (a marker's included), so producer.id.expiration.ms counts from it after the
// reopen, not from the reopen.
func TestExpireProducersAfterReopen(t *testing.T) {
	const exp = 100
	dir := t.TempDir()
	r := realReplica(t, dir, 0)
	if err := r.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, pidBatchAt(7, 0, 0, 1, "a", 1000))
	mustAppend(t, r, txnBatchAt(8, 0, 0, 1, "t", 1000))
	if _, err := r.AppendMarkerAsLeader(8, 1, 0, false, 3000); err != nil { // bumped epoch: no batch retained
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := realReplica(t, dir, 0)
	if got := r2.ExpireProducers(1000+exp-1, exp); got != 0 {
		t.Fatalf("%d expired before their time", got)
	}
	if got := r2.ExpireProducers(1000+exp, exp); got != 1 {
		t.Fatalf("%d expired at producer 7's time, want 1", got)
	}
	if got := r2.ExpireProducers(3000+exp-1, exp); got != 0 {
		t.Fatalf("%d expired before producer 8's marker time + expiration", got)
	}
	if got := r2.ExpireProducers(3000+exp, exp); got != 1 {
		t.Fatalf("%d expired at producer 8's marker time + expiration, want 1", got)
	}
}

// TestExpireProducersConcurrent: expiration running all the time beside the leader appends
// of several producers (every producer always past its time) never races them (run with
// -race) and never fails an append with anything but a retriable NOT_LEADER_OR_FOLLOWER
// (the entry went between the lookup and the append lock); every append lands once retried.
func TestExpireProducersConcurrent(t *testing.T) {
	r := realLeader(t)
	const producers, batches = 4, 200
	stop := make(chan struct{})
	expired := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				expired <- n
				return
			default:
				n += r.ExpireProducers(1<<40, 1)
			}
		}
	}()
	errs := make(chan error, producers)
	for p := int64(0); p < producers; p++ {
		go func() {
			for seq := int32(0); seq < batches; seq++ {
				for {
					_, err := r.AppendAsLeader(pidBatch(100+p, 0, seq, 1, "e"), 1)
					if err == nil {
						break
					}
					if !errors.Is(err, kerr.NotLeaderForPartition) {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if n := <-expired; n == 0 {
		t.Fatal("nothing expired: the test did not exercise expiration")
	}
	if got := r.LEO(); got != producers*batches {
		t.Fatalf("LEO %d, want %d (each append once)", got, producers*batches)
	}
}
