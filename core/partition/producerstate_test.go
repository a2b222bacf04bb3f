package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// pidBatch builds one uncompressed batch of n records from producer pid at
// epoch with base sequence seq (values "tag-i"), CRC recomputed.
func pidBatch(pid int64, epoch int16, seq int32, n int, tag string) []byte {
	return pidBatchAt(pid, epoch, seq, n, tag, 0)
}

// pidBatchAt is pidBatch with the records' timestamp tsMs.
func pidBatchAt(pid int64, epoch int16, seq int32, n int, tag string, tsMs int64) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	b := records.AppendBatch(nil, 0, 0, tsMs, recs)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// realReplica opens a replica of "t-0" on broker id over a core/log.Log in dir.
func realReplica(t *testing.T, dir string, id int32) *Replica {
	t.Helper()
	return realReplicaWith(t, dir, id, log.DefaultConfig())
}

// realReplicaWith is realReplica on a log with cfg.
func realReplicaWith(t *testing.T, dir string, id int32, cfg log.Config) *Replica {
	t.Helper()
	l, _, err := log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplica("t", 0, id, l, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func pstate(leader int32, epoch int32) controller.PartitionState {
	return controller.PartitionState{Topic: "t", Leader: leader, LeaderEpoch: epoch, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
}

func realLeader(t *testing.T) *Replica {
	t.Helper()
	r := realReplica(t, t.TempDir(), 0)
	if err := r.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	return r
}

// copyToFollower moves everything the follower lacks from leader to follower.
func copyToFollower(t *testing.T, leader, follower *Replica) {
	t.Helper()
	off := follower.LEO()
	if off == leader.LEO() {
		return
	}
	sl, err := leader.Read(off, leader.LEO(), 1<<30, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sl.ReadAll(nil)
	sl.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendAsFollower(data, leader.HW()); err != nil {
		t.Fatal(err)
	}
}

func mustProducer(t *testing.T, r *Replica, pid int64) ProducerInfo {
	t.Helper()
	p, ok := r.Producer(pid)
	if !ok {
		t.Fatalf("broker %d: producer %d unknown", r.BrokerID(), pid)
	}
	return p
}

// TestIdempotentDuplicateOfLastFive appends 7 batches of one producer; a
// retry of each of the last 5 returns its original offsets and appends
// nothing; a retry of an older one is out of order.
func TestIdempotentDuplicateOfLastFive(t *testing.T) {
	r := realLeader(t)
	var infos []log.AppendInfo
	for i := 0; i < 7; i++ {
		info, err := r.AppendAsLeader(pidBatch(1, 0, int32(3*i), 3, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if info.FirstOffset != int64(3*i) || info.LastOffset != int64(3*i+2) || info.Batches != 1 {
			t.Fatalf("batch %d: info %+v", i, info)
		}
		infos = append(infos, info)
	}
	leo := r.LEO()
	for i := 2; i < 7; i++ {
		info, err := r.AppendAsLeader(pidBatch(1, 0, int32(3*i), 3, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatalf("retry of batch %d: %v", i, err)
		}
		if info.FirstOffset != infos[i].FirstOffset || info.LastOffset != infos[i].LastOffset || info.Batches != 0 || info.Records != 0 {
			t.Fatalf("retry of batch %d: info %+v, want offsets [%d, %d] and nothing appended", i, info, infos[i].FirstOffset, infos[i].LastOffset)
		}
		if r.LEO() != leo {
			t.Fatalf("retry of batch %d moved the LEO %d -> %d", i, leo, r.LEO())
		}
	}
	for i := 0; i < 2; i++ { // evicted from the last 5
		_, err := r.AppendAsLeader(pidBatch(1, 0, int32(3*i), 3, "old"), 1)
		wantCode(t, err, kerr.OutOfOrderSequenceNumber)
	}
	if r.LEO() != leo {
		t.Fatalf("LEO %d, want %d", r.LEO(), leo)
	}
	p := mustProducer(t, r, 1)
	if len(p.Batches) != NumBatchesToRetain || p.Batches[0].FirstSequence != 6 || p.Batches[4].LastSequence != 20 || p.Batches[4].LastOffset != 20 {
		t.Fatalf("producer state %+v", p)
	}
	// A retry whose bytes are corrupt is not a success.
	bad := pidBatch(1, 0, 18, 3, "b6")
	bad[len(bad)-1] ^= 0xff
	_, err := r.AppendAsLeader(bad, 1)
	wantCode(t, err, kerr.CorruptMessage)
}

// TestIdempotentSequenceRules runs scripted appends, each case on a fresh
// leader.
func TestIdempotentSequenceRules(t *testing.T) {
	type step struct {
		pid     int64
		epoch   int16
		seq     int32
		n       int
		want    *kerr.Error // nil = appended
		wantDup int         // >0: duplicate of the 1-based step number
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{1, 0, 0, 2, nil, 0}, {1, 0, 2, 1, nil, 0}, {1, 0, 3, 5, nil, 0}}},
		{"gap", []step{{1, 0, 0, 2, nil, 0}, {1, 0, 3, 1, kerr.OutOfOrderSequenceNumber, 0}, {1, 0, 2, 1, nil, 0}}},
		{"overlap is not a duplicate", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 1, 2, kerr.OutOfOrderSequenceNumber, 0}}},
		{"duplicate", []step{{1, 0, 0, 3, nil, 0}, {1, 0, 3, 3, nil, 0}, {1, 0, 0, 3, nil, 1}, {1, 0, 6, 1, nil, 0}}},
		{"epoch bump restarts at 0", []step{{1, 0, 0, 3, nil, 0}, {1, 1, 0, 2, nil, 0}, {1, 1, 2, 1, nil, 0}}},
		{"epoch bump must start at 0", []step{{1, 0, 0, 3, nil, 0}, {1, 1, 3, 1, kerr.OutOfOrderSequenceNumber, 0}}},
		{"epoch bump forgets old duplicates", []step{{1, 0, 0, 3, nil, 0}, {1, 1, 0, 3, nil, 0}, {1, 1, 0, 3, nil, 2}}},
		{"fenced epoch", []step{{1, 2, 0, 1, nil, 0}, {1, 1, 1, 1, kerr.InvalidProducerEpoch, 0}, {1, 1, 0, 1, kerr.InvalidProducerEpoch, 0}}},
		{"unknown producer with seq != 0 accepted (KIP-360)", []step{{9, 3, 42, 2, nil, 0}, {9, 3, 44, 1, nil, 0}, {9, 3, 42, 2, nil, 1}}},
		{"producers are independent", []step{{1, 0, 0, 1, nil, 0}, {2, 0, 0, 1, nil, 0}, {1, 0, 1, 1, nil, 0}, {2, 0, 0, 1, nil, 2}}},
		{"sequence wraps", []step{{1, 0, math.MaxInt32 - 1, 2, nil, 0}, {1, 0, 0, 1, nil, 0}, {1, 0, 1, 1, nil, 0}}},
		{"batch spanning the wrap", []step{{1, 0, math.MaxInt32 - 1, 4, nil, 0}, {1, 0, 2, 1, nil, 0}, {1, 0, math.MaxInt32 - 1, 4, nil, 1}}},
		{"negative sequence", []step{{1, 0, -5, 1, kerr.InvalidRecord, 0}}},
		{"negative epoch", []step{{1, -1, 0, 1, kerr.InvalidRecord, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := realLeader(t)
			infos := make([]log.AppendInfo, len(tc.steps))
			for i, s := range tc.steps {
				leo := r.LEO()
				info, err := r.AppendAsLeader(pidBatch(s.pid, s.epoch, s.seq, s.n, fmt.Sprint("s", i)), -1)
				infos[i] = info
				switch {
				case s.want != nil:
					wantCode(t, err, s.want)
					if r.LEO() != leo {
						t.Fatalf("step %d: rejected batch moved the LEO", i+1)
					}
				case err != nil:
					t.Fatalf("step %d: %v", i+1, err)
				case s.wantDup > 0:
					orig := infos[s.wantDup-1]
					if info.Batches != 0 || info.FirstOffset != orig.FirstOffset || info.LastOffset != orig.LastOffset || r.LEO() != leo {
						t.Fatalf("step %d: info %+v, want duplicate of step %d %+v", i+1, info, s.wantDup, orig)
					}
				default:
					if info.Batches != 1 || info.FirstOffset != leo || r.LEO() != leo+int64(s.n) {
						t.Fatalf("step %d: info %+v LEO %d, want appended at %d", i+1, info, r.LEO(), leo)
					}
				}
			}
		})
	}
}

// TestIdempotentOtherBatches: batches without a producer id are never
// checked, and an idempotent blob must hold exactly one batch.
func TestIdempotentOtherBatches(t *testing.T) {
	r := realLeader(t)
	for i := 0; i < 3; i++ {
		if _, err := r.AppendAsLeader(oneBatch(2), 1); err != nil {
			t.Fatal(err)
		}
	}
	if r.Producers() != 0 {
		t.Fatalf("tracking %d producers after plain batches", r.Producers())
	}
	if _, err := r.AppendAsLeader(batches(3), 1); err != nil {
		t.Fatalf("plain multi-batch blob: %v", err)
	}
	two := append(pidBatch(1, 0, 0, 1, "a"), pidBatch(1, 0, 1, 1, "b")...)
	_, err := r.AppendAsLeader(two, 1)
	wantCode(t, err, kerr.InvalidRecord)
	mixed := append(oneBatch(1), pidBatch(1, 0, 0, 1, "b")...)
	_, err = r.AppendAsLeader(mixed, 1)
	wantCode(t, err, kerr.InvalidRecord)
	if r.Producers() != 0 || r.LEO() != 9 {
		t.Fatalf("producers %d LEO %d", r.Producers(), r.LEO())
	}
}

// TestIdempotentConcurrentRetries: many goroutines send the same batch at
// once; exactly one copy is appended and every caller gets its offsets.
func TestIdempotentConcurrentRetries(t *testing.T) {
	r := realLeader(t)
	const senders = 8
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		got := make([]log.AppendInfo, senders)
		errs := make([]error, senders)
		for g := 0; g < senders; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[g], errs[g] = r.AppendAsLeader(pidBatch(1, 0, int32(2*round), 2, "x"), 1)
			}()
		}
		// Plain appends race with them on the lock-free path.
		if _, err := r.AppendAsLeader(oneBatch(1), 1); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		appended := 0
		for g := 0; g < senders; g++ {
			if errs[g] != nil {
				t.Fatalf("round %d sender %d: %v", round, g, errs[g])
			}
			if got[g].Batches == 1 {
				appended++
			}
			if got[g].FirstOffset != got[0].FirstOffset || got[g].LastOffset != got[0].LastOffset {
				t.Fatalf("round %d: senders got %+v and %+v", round, got[0], got[g])
			}
		}
		if appended != 1 {
			t.Fatalf("round %d: batch appended %d times", round, appended)
		}
	}
	if r.LEO() != 20*2+20 {
		t.Fatalf("LEO %d, want 60", r.LEO())
	}
}

// TestIdempotentFollowerTakesOver: a follower builds the same producer
// state from the batches it replicates and, once leader, deduplicates
// retries of batches the old leader wrote.
func TestIdempotentFollowerTakesOver(t *testing.T) {
	r0 := realReplica(t, t.TempDir(), 0)
	r1 := realReplica(t, t.TempDir(), 1)
	if err := r0.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeFollower(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	var infos []log.AppendInfo
	for i := 0; i < 8; i++ {
		pid := int64(1 + i%2)
		info, err := r0.AppendAsLeader(pidBatch(pid, 0, int32(2*(i/2)), 2, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
		if _, err := r0.AppendAsLeader(oneBatch(1), 1); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			copyToFollower(t, r0, r1)
		}
	}
	copyToFollower(t, r0, r1)
	for _, pid := range []int64{1, 2} {
		p0, p1 := mustProducer(t, r0, pid), mustProducer(t, r1, pid)
		if p0.ProducerEpoch != p1.ProducerEpoch || !slices.Equal(p0.Batches, p1.Batches) {
			t.Fatalf("producer %d: leader %+v follower %+v", pid, p0, p1)
		}
	}
	// Failover: r1 leads epoch 1; the producers retry their last batches.
	if err := r0.MakeFollower(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeLeader(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	leo := r1.LEO()
	for i := 6; i < 8; i++ {
		pid := int64(1 + i%2)
		info, err := r1.AppendAsLeader(pidBatch(pid, 0, int32(2*(i/2)), 2, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		if info.Batches != 0 || info.FirstOffset != infos[i].FirstOffset || info.LastOffset != infos[i].LastOffset {
			t.Fatalf("retry of batch %d on the new leader: %+v, want duplicate of %+v", i, info, infos[i])
		}
	}
	if r1.LEO() != leo {
		t.Fatalf("new leader appended duplicates: LEO %d -> %d", leo, r1.LEO())
	}
	info, err := r1.AppendAsLeader(pidBatch(1, 0, 8, 2, "next"), 1)
	if err != nil || info.Batches != 1 || info.FirstOffset != leo {
		t.Fatalf("next batch: %+v %v", info, err)
	}
}

// TestIdempotentTruncation: truncation drops the state of the batches it
// removes (rebuilt from the log, so batches that had left the window of 5
// come back), and a retried batch that was truncated away is appended again.
func TestIdempotentTruncation(t *testing.T) {
	r0 := realReplica(t, t.TempDir(), 0)
	r1 := realReplica(t, t.TempDir(), 1)
	if err := r0.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeFollower(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	var infos []log.AppendInfo
	for i := 0; i < 8; i++ {
		info, err := r0.AppendAsLeader(pidBatch(1, 0, int32(3*i), 3, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	copyToFollower(t, r0, r1)
	// Truncate the follower inside batch 6: batches 6 and 7 go.
	if err := r1.TruncateTo(infos[6].FirstOffset + 1); err != nil {
		t.Fatal(err)
	}
	if r1.LEO() != infos[6].FirstOffset {
		t.Fatalf("LEO %d, want %d", r1.LEO(), infos[6].FirstOffset)
	}
	p := mustProducer(t, r1, 1)
	var seqs []int32
	for _, b := range p.Batches {
		seqs = append(seqs, b.FirstSequence)
		if b.LastOffset >= infos[6].FirstOffset {
			t.Fatalf("state keeps batch %+v above the truncation point %d", b, infos[6].FirstOffset)
		}
	}
	if !slices.Equal(seqs, []int32{3, 6, 9, 12, 15}) {
		t.Fatalf("retained first sequences %v, want batches 1..5", seqs)
	}
	if err := r1.MakeLeader(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	// Batch 1 left the leader's window but is back in the rebuilt one.
	if info, err := r1.AppendAsLeader(pidBatch(1, 0, 3, 3, "b1"), 1); err != nil || info.Batches != 0 || info.FirstOffset != infos[1].FirstOffset {
		t.Fatalf("retry of batch 1: %+v %v", info, err)
	}
	// Batch 6 was truncated away: its retry is appended again.
	info, err := r1.AppendAsLeader(pidBatch(1, 0, 18, 3, "b6"), 1)
	if err != nil || info.Batches != 1 || info.FirstOffset != infos[6].FirstOffset {
		t.Fatalf("retry of truncated batch 6: %+v %v, want appended at %d", info, err, infos[6].FirstOffset)
	}
	// Batch 7 is next in sequence; a second retry of 6 is a duplicate.
	if info, err := r1.AppendAsLeader(pidBatch(1, 0, 18, 3, "b6"), 1); err != nil || info.Batches != 0 {
		t.Fatalf("second retry of batch 6: %+v %v", info, err)
	}
	if info, err := r1.AppendAsLeader(pidBatch(1, 0, 21, 3, "b7"), 1); err != nil || info.Batches != 1 {
		t.Fatalf("batch 7: %+v %v", info, err)
	}

	// Truncating the old leader (now a follower) fully forgets the producer.
	if err := r0.MakeFollower(pstate(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := r0.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := r0.Producer(1); ok || r0.Producers() != 0 {
		t.Fatal("producer state survived truncation to 0")
	}
	copyToFollower(t, r1, r0)
	p0, p1 := mustProducer(t, r0, 1), mustProducer(t, r1, 1)
	if !slices.Equal(p0.Batches, p1.Batches) {
		t.Fatalf("after re-replication: %+v vs %+v", p0, p1)
	}
	if err := r0.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if r0.Producers() != 0 {
		t.Fatal("producer state survived TruncateFullyAndStartAt")
	}
}

// TestIdempotentStateReopened: a replica reopened over its log (recovery)
// has the same producer state and deduplicates retries.
func TestIdempotentStateReopened(t *testing.T) {
	dir := t.TempDir()
	l, _, err := log.Open(dir, log.Config{SegmentBytes: 300, IndexIntervalBytes: 4096, RetentionBytes: -1, RetentionMs: -1, FlushMessages: math.MaxInt64, FlushMs: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplica("t", 0, 0, l, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	var infos []log.AppendInfo
	for i := 0; i < 9; i++ {
		pid := int64(10 + i%3)
		epoch := int16(0)
		seq := int32(i / 3)
		if pid == 12 && i >= 6 { // producer 12 bumps its epoch
			epoch, seq = 1, 0
		}
		info, err := r.AppendAsLeader(pidBatch(pid, epoch, seq, 1, fmt.Sprint("b", i)), 1)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
		if _, err := r.AppendAsLeader(oneBatch(2), 1); err != nil {
			t.Fatal(err)
		}
	}
	if l.Segments() < 3 {
		t.Fatalf("want several segments, have %d", l.Segments())
	}
	before := map[int64]ProducerInfo{}
	for _, pid := range []int64{10, 11, 12} {
		before[pid] = mustProducer(t, r, pid)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := realReplica(t, dir, 0)
	for pid, p := range before {
		q := mustProducer(t, r2, pid)
		if q.ProducerEpoch != p.ProducerEpoch || !slices.Equal(q.Batches, p.Batches) {
			t.Fatalf("producer %d: before %+v after reopen %+v", pid, p, q)
		}
	}
	if got := before[12]; got.ProducerEpoch != 1 || len(got.Batches) != 1 {
		t.Fatalf("producer 12 after the epoch bump: %+v", got)
	}
	if err := r2.MakeLeader(pstate(0, 1)); err != nil {
		t.Fatal(err)
	}
	if info, err := r2.AppendAsLeader(pidBatch(11, 0, 2, 1, "b7"), -1); err != nil || info.Batches != 0 || info.FirstOffset != infos[7].FirstOffset {
		t.Fatalf("retry after reopen: %+v %v, want duplicate of %+v", info, err, infos[7])
	}
	_, err = r2.AppendAsLeader(pidBatch(12, 0, 3, 1, "old epoch"), 1)
	wantCode(t, err, kerr.InvalidProducerEpoch)
}

// TestAppendAsLeaderAllocs: plain batches stay allocation-free, and so do
// in-sequence idempotent batches once the producer is known.
func TestAppendAsLeaderAllocs(t *testing.T) {
	l := &benchLog{}
	r, err := newReplica("t", 0, 0, l, "", Config{Now: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	plain := oneBatch(1)
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := r.AppendAsLeader(plain, 1); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("plain append: %v allocs, want 0", a)
	}
	idem := pidBatch(1, 0, 0, 1, "x")
	var seq int32
	next := func() {
		binary.BigEndian.PutUint32(idem[53:], uint32(seq))
		binary.BigEndian.PutUint32(idem[17:], crc32.Checksum(idem[21:], castagnoliTable))
		seq++
		if _, err := r.AppendAsLeader(idem, 1); err != nil {
			t.Fatal(err)
		}
	}
	next()
	if a := testing.AllocsPerRun(1000, next); a != 0 {
		t.Fatalf("idempotent append: %v allocs, want 0", a)
	}
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// BenchmarkAppendIdempotent: one op is a sequence check + append + record
// of an in-sequence idempotent batch (the log only moves its LEO).
func BenchmarkAppendIdempotent(b *testing.B) {
	r, _ := benchLeader(b, 1, HWUpdateAtomic)
	idem := pidBatch(1, 0, 0, 1, "x")
	b.ReportAllocs()
	var seq int32
	for b.Loop() {
		binary.BigEndian.PutUint32(idem[53:], uint32(seq))
		seq++
		if _, err := r.AppendAsLeader(idem, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIdempotentConcurrentProducers: several producers append in parallel,
// each sending every batch twice at once (a retry racing its original); the log holds each batch once,
// every producer's batches in sequence order.
func TestIdempotentConcurrentProducers(t *testing.T) {
	r := realLeader(t)
	const producers, perProducer = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := int64(1); p <= producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				// Two copies of the batch at once (a retry racing the original).
				var copies sync.WaitGroup
				var cerr [2]error
				for c := range cerr {
					copies.Add(1)
					go func() {
						defer copies.Done()
						_, cerr[c] = r.AppendAsLeader(pidBatch(p, 0, int32(2*i), 2, fmt.Sprint("p", p)), 1)
					}()
				}
				copies.Wait()
				for _, err := range cerr {
					if err != nil {
						errs <- fmt.Errorf("producer %d batch %d: %w", p, i, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sl, err := r.Read(0, r.LEO(), 1<<30, true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sl.ReadAll(nil)
	sl.Release()
	if err != nil {
		t.Fatal(err)
	}
	next := map[int64]int32{}
	if err := records.Split(data, func(_ []byte, h records.Header) error {
		if h.BaseSequence != next[h.ProducerID] {
			return fmt.Errorf("producer %d: batch with sequence %d at offset %d, want %d", h.ProducerID, h.BaseSequence, h.BaseOffset, next[h.ProducerID])
		}
		next[h.ProducerID] += 2
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for p := int64(1); p <= producers; p++ {
		if next[p] != 2*perProducer {
			t.Fatalf("producer %d: %d records in the log, want %d", p, next[p], 2*perProducer)
		}
	}
	if r.LEO() != producers*perProducer*2 {
		t.Fatalf("LEO %d", r.LEO())
	}
}

// FuzzIdempotentSequence drives a leader with random idempotent batches
// (three producers, epoch bumps and fenced epochs, in-order, gapped,
// retried and wrapping sequences) and checks every answer against a
// brute-force model of Kafka's rules that keeps every batch.
func FuzzIdempotentSequence(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 3})
	f.Add([]byte{1, 0, 7, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 2, 0, 1, 0, 4})
	f.Add([]byte{2, 0, 0, 2, 0, 8, 2, 0, 16, 2, 0, 0, 2, 0, 2, 2, 0, 3, 2, 0, 4, 2, 0, 5, 2, 0, 6})
	f.Fuzz(fuzzIdempotentScript)
}

// idemMeta / idemModel are the reference model of FuzzIdempotentSequence:
// every batch of the producer's current epoch, sequences and offsets
// inclusive.
type idemMeta struct{ first, last, firstOff, lastOff int64 }

type idemModel struct {
	known   bool
	epoch   int16
	batches []idemMeta
}

func fuzzIdempotentScript(t *testing.T, script []byte) {
	const wrap = int64(math.MaxInt32) + 1
	{
		r, l, _ := newLeader(t, 1, Config{})
		models := map[int64]*idemModel{}
		for i := 0; i+3 <= len(script) && i < 3*200; i += 3 {
			pid := int64(script[i] % 3)
			m := models[pid]
			if m == nil {
				m = &idemModel{}
				models[pid] = m
			}
			epoch := m.epoch
			switch script[i+1] % 4 {
			case 1:
				epoch++
			case 2:
				epoch = max(0, epoch-1)
			}
			n := int64(1 + (script[i+2]>>3)%3)
			var seq int64
			nextSeq := int64(0)
			if len(m.batches) > 0 {
				nextSeq = (m.batches[len(m.batches)-1].last + 1) % wrap
			}
			switch k := int(script[i+2] % 8); {
			case k == 0:
				seq = nextSeq
			case k == 1:
				seq = (nextSeq + 1) % wrap
			case k <= 6:
				if j := len(m.batches) - (k - 1); j >= 0 && j < len(m.batches) {
					seq = m.batches[j].first // a retry, maybe of another size
				}
			default:
				seq = math.MaxInt32 - 1
			}
			last := (seq + n - 1) % wrap
			leo := l.LEO()
			info, err := r.AppendAsLeader(pidBatch(pid, epoch, int32(seq), int(n), "f"), 1)
			step := fmt.Sprintf("step %d: pid %d epoch %d seq %d n %d (model epoch %d known %v)", i/3, pid, epoch, seq, n, m.epoch, m.known)

			var want *kerr.Error
			var dup *idemMeta
			switch {
			case !m.known:
			case epoch < m.epoch:
				want = kerr.InvalidProducerEpoch
			case epoch > m.epoch:
				if seq != 0 {
					want = kerr.OutOfOrderSequenceNumber
				}
			default:
				for j := max(0, len(m.batches)-NumBatchesToRetain); j < len(m.batches); j++ {
					if b := m.batches[j]; b.first == seq && b.last == last {
						dup = &m.batches[j]
					}
				}
				if dup == nil && seq != nextSeq {
					want = kerr.OutOfOrderSequenceNumber
				}
			}
			switch {
			case want != nil:
				if !errors.Is(err, want) || l.LEO() != leo {
					t.Fatalf("%s: got %v (LEO %d -> %d), want %s", step, err, leo, l.LEO(), want.Message)
				}
			case err != nil:
				t.Fatalf("%s: %v", step, err)
			case dup != nil:
				if info.Batches != 0 || info.FirstOffset != dup.firstOff || info.LastOffset != dup.lastOff || l.LEO() != leo {
					t.Fatalf("%s: got %+v, want duplicate of %+v", step, info, *dup)
				}
			default:
				if info.Batches != 1 || info.FirstOffset != leo || info.LastOffset != leo+n-1 {
					t.Fatalf("%s: got %+v, want appended at %d", step, info, leo)
				}
				if !m.known || epoch > m.epoch {
					m.batches = m.batches[:0]
				}
				m.known, m.epoch = true, epoch
				m.batches = append(m.batches, idemMeta{seq, last, info.FirstOffset, info.LastOffset})
			}
		}
	}
}
