package netfetch_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// idemBatch is one uncompressed batch of n records from producer pid at
// epoch with base sequence seq (values tag-i), CRC recomputed.
func idemBatch(pid int64, epoch int16, seq int32, n int, tag string) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	b := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), recs)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestRawDuplicateProduceReturnsOriginalOffset sends the same idempotent
// batch twice through a kgo client's Request (as a client retry would) and
// gets the same base offset back, with one copy in the log; a sequence gap
// and a fenced epoch get Kafka's error codes.
func TestRawDuplicateProduceReturnsOriginalOffset(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	const topic = "dup"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition(topic, 0)
	cl := clustertest.NewClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ipReq := kmsg.NewPtrInitProducerIDRequest()
	ipReq.TransactionTimeoutMillis = -1
	ir, err := ipReq.RequestWith(ctx, cl)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v code %d", err, ir.ErrorCode)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	leader := cl.Broker(int(st.Leader))
	send := func(batch []byte) (int64, int16) {
		t.Helper()
		req := kafkatest.NewProduce(topic, -1, batch)
		resp, err := req.RequestWith(ctx, leader)
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("produce response %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.BaseOffset, p.ErrorCode
	}
	steps := []struct {
		name     string
		batch    []byte
		wantBase int64
		wantErr  *kerr.Error
	}{
		{"first batch", idemBatch(pid, epoch, 0, 3, "a"), 0, nil},
		{"retry of the first batch", idemBatch(pid, epoch, 0, 3, "a"), 0, nil},
		{"second batch", idemBatch(pid, epoch, 3, 2, "b"), 3, nil},
		{"retry of the first batch again", idemBatch(pid, epoch, 0, 3, "a"), 0, nil},
		{"retry of the second batch", idemBatch(pid, epoch, 3, 2, "b"), 3, nil},
		{"sequence gap", idemBatch(pid, epoch, 9, 1, "gap"), -1, kerr.OutOfOrderSequenceNumber},
		{"epoch bump restarts at 0", idemBatch(pid, epoch+1, 0, 1, "c"), 5, nil},
		{"old epoch is fenced", idemBatch(pid, epoch, 5, 1, "old"), -1, kerr.InvalidProducerEpoch},
		{"plain batch", kafkatest.Batch(0), 6, nil},
	}
	for _, s := range steps {
		base, code := send(s.batch)
		wantCode := int16(0)
		if s.wantErr != nil {
			wantCode = s.wantErr.Code
		}
		if code != wantCode || (s.wantErr == nil && base != s.wantBase) {
			t.Fatalf("%s: base offset %d error %v, want %d error %v", s.name, base, kerr.ErrorForCode(code), s.wantBase, s.wantErr)
		}
	}
	got := clustertest.ConsumeAll(t, c, topic)[0]
	var vals []string
	for _, r := range got {
		vals = append(vals, r.Value)
	}
	if want := []string{"a-0", "a-1", "a-2", "b-0", "b-1", "c-0", "v"}; !slices.Equal(vals, want) {
		t.Fatalf("log holds %q, want %q", vals, want)
	}
	// Every replica tracks the producer (replicated state) at the new epoch.
	for _, id := range st.Replicas {
		r, _ := c.Broker(id).Replica(topic, 0)
		for r.LEO() < 7 {
			select {
			case <-r.LEOChanged():
			case <-ctx.Done():
				t.Fatalf("broker %d LEO %d", id, r.LEO())
			}
		}
		if p, ok := r.Producer(pid); !ok || p.ProducerEpoch != epoch+1 || len(p.Batches) != 1 || p.Batches[0].FirstOffset != 5 {
			t.Errorf("broker %d producer state %+v (known %v)", id, p, ok)
		}
	}
}

// TestIdempotentProducerSurvivesLeaderKills streams records from kgo's
// idempotent producer (acks=all, up to 5 requests in flight) while the
// leader of partition 0 is killed, several rounds, then reads everything
// back: every record exactly once (no duplicates from retried batches the
// old leader had already written and replicated) and no acknowledged loss.
func TestIdempotentProducerSurvivesLeaderKills(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 20 })
	const topic, parts, rounds, perRound = "idem", 3, 5, 1500
	if err := c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	var dataLoss atomic.Int64
	cl := clustertest.NewClient(t, c,
		kgo.RecordDeliveryTimeout(40*time.Second),
		kgo.ProducerLinger(0),
		kgo.ProducerOnDataLossDetected(func(string, int32) { dataLoss.Add(1) }),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	var acks []clustertest.Ack
	var produceErrs []error
	sent := 0
	for round := 0; round < rounds; round++ {
		before, _ := c.Controller().Partition(topic, 0)
		victim := before.Leader
		var wg sync.WaitGroup
		half := make(chan struct{})
		var acked atomic.Int64
		for i := 0; i < perRound; i++ {
			wg.Add(1)
			v := fmt.Sprintf("r%d-%05d", round, i)
			sent++
			// Keys spread the records over the partitions; partition 0
			// gets a third, in many small batches.
			rec := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 11)), Value: []byte(v)}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				if err != nil {
					produceErrs = append(produceErrs, fmt.Errorf("%s: %w", r.Value, err))
				} else {
					acks = append(acks, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				}
				mu.Unlock()
				if acked.Add(1) == perRound/3 {
					close(half)
				}
			})
		}
		// Kill the leader of partition 0 while the rest is in flight.
		select {
		case <-half:
		case <-ctx.Done():
			t.Fatalf("round %d: produces never acknowledged; %s", round, describeCluster(c, topic))
		}
		if err := c.KillBroker(victim); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		waitState(t, c, topic, 0, "a new leader", func(s controller.PartitionState) bool { return s.Leader >= 0 && s.Leader != victim })
		if err := c.RestartBroker(victim); err != nil {
			t.Fatal(err)
		}
		// The next round starts with the full ISR (min.insync.replicas 2
		// must hold after the next kill).
		after := waitState(t, c, topic, 0, "the restarted broker back in the ISR", func(s controller.PartitionState) bool {
			return s.Leader >= 0 && len(s.ISR) == len(s.Replicas)
		})
		t.Logf("round %d: killed leader %d (epoch %d); now leader %d epoch %d ISR %v", round, victim, before.LeaderEpoch, after.Leader, after.LeaderEpoch, after.ISR)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, err := range produceErrs {
		if i < 5 {
			t.Errorf("produce failed: %v", err)
		}
	}
	if len(produceErrs) > 0 {
		t.Fatalf("%d of %d produces failed", len(produceErrs), sent)
	}
	if n := dataLoss.Load(); n > 0 {
		t.Errorf("kgo detected data loss (OUT_OF_ORDER_SEQUENCE_NUMBER) %d times", n)
	}

	// A new leader's HW may lag the acknowledged offsets until its
	// followers fetch (as in Kafka); wait for it before reading back.
	maxAcked := map[int32]int64{}
	for _, a := range acks {
		maxAcked[a.Partition] = max(maxAcked[a.Partition], a.Offset)
	}
	for p, off := range maxAcked {
		waitLeaderHW(t, ctx, c, topic, p, off+1)
	}
	got := clustertest.ConsumeAll(t, c, topic)
	clustertest.CheckNoLoss(t, acks, got)
	seen := map[string]int{}
	total, dups := 0, 0
	for p, recs := range got {
		for _, r := range recs {
			total++
			if seen[r.Value]++; seen[r.Value] == 2 {
				dups++
				if dups <= 5 {
					t.Errorf("record %q duplicated (partition %d offset %d)", r.Value, p, r.Offset)
				}
			}
		}
	}
	if dups > 0 || total != sent || len(seen) != sent {
		t.Fatalf("read back %d records (%d distinct, %d duplicated), sent %d", total, len(seen), dups, sent)
	}
	t.Logf("%d records in %d rounds of leader kills: no duplicates, no loss", sent, rounds)
	clustertest.CheckReplicasIdentical(t, c, topic, parts)
}

// waitLeaderHW waits until the current leader of topic-p has a HW >= hw
// (exclusive end), following leader changes, until ctx ends.
func waitLeaderHW(t *testing.T, ctx context.Context, c *cluster.Cluster, topic string, p int32, hw int64) {
	t.Helper()
	for {
		st, _ := c.Controller().Partition(topic, p)
		var ch <-chan struct{}
		cur := int64(-1)
		if b := c.Broker(st.Leader); b != nil {
			if r, ok := b.Replica(topic, p); ok {
				ch = r.HWChanged()
				if cur = r.HW(); cur >= hw && r.IsLeader() {
					return
				}
			}
		}
		if ch == nil {
			t.Fatalf("%s-%d: no leader replica (state %v)", topic, p, st)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s-%d: leader %d HW %d never reached %d: acknowledged records missing", topic, p, st.Leader, cur, hw)
		}
	}
}

// waitState waits until the controller's current state of topic-p satisfies
// cond, re-checking on every state change (a subscription is only a wake-up:
// stale queued states are never trusted), with a 30 s deadline.
func waitState(t *testing.T, c *cluster.Cluster, topic string, p int32, what string, cond func(controller.PartitionState) bool) controller.PartitionState {
	t.Helper()
	st, _ := c.Controller().Partition(topic, p)
	wake := make(chan struct{}, 1)
	cancel := c.Controller().Subscribe(st.Replicas[0], func(u controller.Update) {
		if s := u.Partition; s != nil && s.Topic == topic && s.Partition == p {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer cancel()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		st, _ = c.Controller().Partition(topic, p)
		if cond(st) {
			return st
		}
		select {
		case <-wake:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; state %v", what, st)
		}
	}
}

// describeCluster is the controller's and every broker's view of topic, for failures.
func describeCluster(c *cluster.Cluster, topic string) string {
	var b strings.Builder
	states, _ := c.Controller().Partitions(topic)
	for _, st := range states {
		fmt.Fprintf(&b, "\n  controller: %v", st)
	}
	for _, id := range c.BrokerIDs() {
		br := c.Broker(id)
		if br == nil {
			continue
		}
		for _, pi := range br.Partitions() {
			if pi.Topic == topic {
				fmt.Fprintf(&b, "\n  broker %d (epoch %d): p%d leader=%v epoch=%d isr=%v hw=%d leo=%d followers=%v",
					id, br.Epoch(), pi.Partition, pi.IsLeader, pi.LeaderEpoch, pi.ISR, pi.HW, pi.LEO, pi.FollowerLEOs)
			}
		}
		for _, f := range br.Fetchers() {
			fmt.Fprintf(&b, "\n  broker %d fetcher from %d:", id, f.Source())
			for _, fp := range f.Partitions() {
				fmt.Fprintf(&b, " %s-%d %s e%d", fp.Topic, fp.Partition, fp.State.Phase, fp.State.LeaderEpoch)
			}
		}
	}
	return b.String()
}
