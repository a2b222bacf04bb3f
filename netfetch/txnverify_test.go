package netfetch_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/netfetch"
)

// verifyCluster starts 3 brokers with transaction.partition.verification.enable = enable.
func verifyCluster(t *testing.T, enable string) *cluster.Cluster {
	t.Helper()
	return clustertest.Start(t, 3, func(c *cluster.Config) {
		c.Txn.NumPartitions = 3
		if err := c.Set("transaction.partition.verification.enable", enable); err != nil {
			t.Fatal(err)
		}
	})
}

// lateProduce sends, straight to the leader of topic-0, one transactional batch of producer
// pid / epoch (transactional id id) holding value, as a produce retried after its
// transaction ended would arrive, and returns the partition's answer.
func lateProduce(t *testing.T, ctx context.Context, c *cluster.Cluster, id string, pid int64, epoch int16, topic, value string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	// The batch follows the producer's last one on the partition: base sequence 1 (the
	// aborted transaction's record had 0), so that the log takes it if nothing else stops it.
	return rawTxnProduce(t, ctx, c, id, pid, epoch, topic, 0, 1, value)
}

// rawTxnProduce sends, straight to the leader of topic-partition, one transactional batch of
// producer pid / epoch (transactional id id) with base sequence seq holding value, and
// returns the partition's answer.
func rawTxnProduce(t *testing.T, ctx context.Context, c *cluster.Cluster, id string, pid int64, epoch int16, topic string, partition, seq int32, value string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	cl := clustertest.NewClient(t, c)
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics[topic].Partitions[partition].Leader
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	b := records.AppendTxnBatch(nil, pid, epoch, time.Now().UnixMilli(), []records.Record{{Value: []byte(value)}})
	binary.BigEndian.PutUint32(b[53:], uint32(seq)) // baseSequence (RecordBatch v2), inside the CRC
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// abortedProducer runs and aborts one transaction of one record on topic-0 with a franz-go
// producer of transactional id id, and returns the producer with its id and epoch.
func abortedProducer(t *testing.T, ctx context.Context, c *cluster.Cluster, id, topic string) (*kgo.Client, int64, int16) {
	t.Helper()
	p := clustertest.NewClient(t, c, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(time.Minute))
	txnRun(t, ctx, p, false, "aborted")
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return p, pid, epoch
}

// TestProduceVerifiesTransaction: KIP-890 part 1. After a transaction is aborted, a late
// transactional batch of it (a retry the network held back) reaches the leader, which has no
// ongoing transaction of that producer: the coordinator says the partition is not in a
// transaction, the produce answers INVALID_TXN_STATE, nothing is appended and the LSO stays
// at the HW. The producer's next transactions go on as before.
func TestProduceVerifiesTransaction(t *testing.T) {
	c := verifyCluster(t, "true")
	if err := c.CreateTopic("late", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p, pid, epoch := abortedProducer(t, ctx, c, "late-1", "late")
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	waitFor(t, "the abort's marker", func() bool {
		hw, lso := endOffsets(t, ctx, adm, "late")
		return hw == 2 && lso == 2 // the aborted record and its ABORT marker
	})

	rp := lateProduce(t, ctx, c, "late-1", pid, epoch, "late", "zombie")
	if err := kerr.ErrorForCode(rp.ErrorCode); err != kerr.InvalidTxnState {
		t.Fatalf("late transactional produce: %v (base offset %d), want INVALID_TXN_STATE", err, rp.BaseOffset)
	}
	if hw, lso := endOffsets(t, ctx, adm, "late"); hw != 2 || lso != 2 {
		t.Fatalf("after the refused produce: HW %d LSO %d, want 2 and 2 (nothing appended)", hw, lso)
	}

	// A producer id the coordinator does not know (its id is right, the producer id not).
	if rp := lateProduce(t, ctx, c, "late-1", pid+1000, 0, "late", "stranger"); rp.ErrorCode == 0 {
		t.Fatalf("produce of an unknown producer id under late-1 appended at %d", rp.BaseOffset)
	}

	// The producer's next transaction is verified (the partition was added) and commits.
	txnRun(t, ctx, p, true, "committed", "end")
	got := consumeUntil(t, c, "late", kgo.ReadCommitted(), "end")
	if len(got) != 1 || got[0] != "committed" {
		t.Fatalf("read_committed: %q, want [committed]", got)
	}
	waitFor(t, "the commit's marker", func() bool {
		hw, lso := endOffsets(t, ctx, adm, "late")
		return hw == 5 && lso == 5
	})
}

// TestProduceWithoutVerificationHangs: with transaction.partition.verification.enable=false
// the same late batch is appended and opens a transaction its coordinator knows nothing of
// (the hanging transaction KIP-890 closes): the LSO stays on it while another producer's
// committed transaction moves the HW past it.
func TestProduceWithoutVerificationHangs(t *testing.T) {
	c := verifyCluster(t, "false")
	if err := c.CreateTopic("hole", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	_, pid, epoch := abortedProducer(t, ctx, c, "hole-1", "hole")
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	waitFor(t, "the abort's marker", func() bool {
		hw, lso := endOffsets(t, ctx, adm, "hole")
		return hw == 2 && lso == 2
	})
	rp := lateProduce(t, ctx, c, "hole-1", pid, epoch, "hole", "zombie")
	if rp.ErrorCode != 0 || rp.BaseOffset != 2 {
		t.Fatalf("late transactional produce without verification: %v at %d, want appended at 2", kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset)
	}
	other := clustertest.NewClient(t, c, kgo.TransactionalID("hole-2"), kgo.DefaultProduceTopic("hole"))
	txnRun(t, ctx, other, true, "other")
	waitFor(t, "the other transaction's commit marker", func() bool {
		hw, _ := endOffsets(t, ctx, adm, "hole")
		return hw == 5
	})
	if hw, lso := endOffsets(t, ctx, adm, "hole"); lso != 2 {
		t.Fatalf("HW %d LSO %d: want the LSO held at the hanging transaction's offset 2", hw, lso)
	}
}

// TestAddPartitionsToTxnVerifyOnly: AddPartitionsToTxn v4 with VerifyOnly, to the
// coordinator (franz-go's sharder routes it and pins v4): a partition the open transaction
// holds answers 0, one it does not INVALID_TXN_STATE, an old epoch PRODUCER_FENCED; a v4
// add (VerifyOnly false) adds the partition, which then verifies.
func TestAddPartitionsToTxnVerifyOnly(t *testing.T) {
	c := verifyCluster(t, "true")
	if err := c.CreateTopic("vo", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("vo-1"), kgo.DefaultProduceTopic("vo"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("a"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := clustertest.NewClient(t, c)
	coord := kadm.NewClient(admin).FindTxnCoordinators(ctx, "vo-1")["vo-1"]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	// to sends a request to vo-1's coordinator as it is (v4, the broker's max); sharded
	// lets franz-go route each transaction to its coordinator (VerifyOnly pins v4+).
	to := kmsg.Requestor(admin.Broker(int(coord.NodeID)))
	send := func(e int16, verify bool, parts ...int32) map[int32]int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "vo-1", pid, e, verify
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "vo", parts
		tx.Topics = append(tx.Topics, tt)
		// A second transaction in the same request: an id nobody initialised.
		other := kmsg.NewAddPartitionsToTxnRequestTransaction()
		other.TransactionalID, other.ProducerID, other.VerifyOnly = "vo-2", pid+1, true
		ot := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		ot.Topic, ot.Partitions = "vo", []int32{0}
		other.Topics = append(other.Topics, ot)
		req.Transactions = append(req.Transactions, tx, other)
		resp, err := req.RequestWith(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != 4 {
			t.Fatalf("answered at v%d, want v4", resp.Version)
		}
		got := map[int32]int16{}
		var sawOther bool
		for _, rt := range resp.Transactions {
			for _, rtt := range rt.Topics {
				for _, rp := range rtt.Partitions {
					if rt.TransactionalID == "vo-2" {
						sawOther = true
						if rp.ErrorCode == 0 {
							t.Fatalf("verify of an unknown transactional id answered 0")
						}
						continue
					}
					got[rp.Partition] = rp.ErrorCode
				}
			}
		}
		if !sawOther {
			t.Fatalf("no answer for the second transaction: %+v", resp.Transactions)
		}
		return got
	}
	want := func(got map[int32]int16, part int32, e *kerr.Error) {
		t.Helper()
		var code int16
		if e != nil {
			code = e.Code
		}
		if got[part] != code {
			t.Fatalf("vo-%d: %v, want %v (all: %v)", part, kerr.ErrorForCode(got[part]), e, got)
		}
	}
	got := send(epoch, true, 0, 1)
	want(got, 0, nil)
	want(got, 1, kerr.InvalidTxnState)
	got = send(epoch-1, true, 0)
	want(got, 0, kerr.ProducerFenced)
	got = send(epoch, false, 2) // v4 add
	want(got, 2, nil)
	got = send(epoch, true, 0, 1, 2)
	want(got, 0, nil)
	want(got, 1, kerr.InvalidTxnState)
	want(got, 2, nil)
	to = admin // franz-go's sharded path
	got = send(epoch, true, 1, 2)
	want(got, 1, kerr.InvalidTxnState)
	want(got, 2, nil)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// TestVerifiedProduceRacesMarker: a batch passes its verification (the partition is in the
// ongoing transaction), then, before its append, the transaction is aborted and its markers
// written: the batch must not open a transaction after the abort (Kafka's VerificationGuard).
// The produce answers INVALID_TXN_STATE, nothing is appended, and the LSO is the HW.
func TestVerifiedProduceRacesMarker(t *testing.T) {
	c := verifyCluster(t, "true")
	if err := c.CreateTopic("race", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("race-1"), kgo.DefaultProduceTopic("race"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("a"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// race-1 enters the transaction (v3, as a client adds it); nothing is written there yet.
	admin := clustertest.NewClient(t, c)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "race-1", pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "race", []int32{1}
	add.Topics = append(add.Topics, at)
	aresp, err := add.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if code := aresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("AddPartitionsToTxn race-1: %v", kerr.ErrorForCode(code))
	}
	md, err := kadm.NewClient(admin).Metadata(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	aborted := make(chan error, 1)
	netfetch.OnTxnVerified(c.Server(md.Topics["race"].Partitions[1].Leader), func(topic string, partition int32) {
		if topic != "race" || partition != 1 {
			return
		}
		// Verified; now the transaction ends (EndTxn answers once its markers are written).
		once.Do(func() { aborted <- p.EndTransaction(ctx, kgo.TryAbort) })
	})
	rp := rawTxnProduce(t, ctx, c, "race-1", pid, epoch, "race", 1, 0, "after the abort")
	if err := <-aborted; err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := kerr.ErrorForCode(rp.ErrorCode); err != kerr.InvalidTxnState {
		t.Fatalf("produce verified before the abort's marker: %v (base offset %d), want INVALID_TXN_STATE", err, rp.BaseOffset)
	}
	adm := kadm.NewClient(admin)
	ends, err := adm.ListEndOffsets(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	hw, lso := ends["race"][1], lsos["race"][1]
	if hw.Err != nil || lso.Err != nil || hw.Offset != 1 || lso.Offset != 1 {
		t.Fatalf("race-1 after the abort: HW %d (%v) LSO %d (%v), want 1 and 1 (the ABORT marker only)", hw.Offset, hw.Err, lso.Offset, lso.Err)
	}
}
