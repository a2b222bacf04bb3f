package netfetch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/txn"
)

func txnCluster(t *testing.T) *cluster.Cluster {
	return clustertest.Start(t, 3, func(c *cluster.Config) {
		c.Group.OffsetsTopicNumPartitions = 5
		c.Txn.NumPartitions = 5
	})
}

// txnRun runs one transaction of values on cl: commit or abort.
func txnRun(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// consumeUntil reads topic from the start with isolation level iso until it reads the value
// last, and returns every value read before it.
func consumeUntil(t *testing.T, c *cluster.Cluster, topic string, iso kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl := clustertest.NewClient(t, c, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s: %v after %v", topic, err, got)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			if string(r.Value) == last {
				done = true
				return
			}
			got = append(got, string(r.Value))
		})
		if done {
			return got
		}
	}
}

// TestTransactionsReadCommitted: a franz-go transactional producer commits some transactions
// and aborts others; a read_committed consumer sees exactly the committed records, a
// read_uncommitted one all of them; an open transaction holds the LSO (ListOffsets
// read_committed) below the HW until it commits; a second producer with the same
// transactional id fences the first.
func TestTransactionsReadCommitted(t *testing.T) {
	c := txnCluster(t)
	const topic = "tx"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p1 := clustertest.NewClient(t, c, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic))
	var committed, all []string
	for i := 0; i < 6; i++ {
		commit := i%2 == 0
		vals := []string{fmt.Sprintf("t%d-a", i), fmt.Sprintf("t%d-b", i), fmt.Sprintf("t%d-c", i)}
		txnRun(t, ctx, p1, commit, vals...)
		all = append(all, vals...)
		if commit {
			committed = append(committed, vals...)
		}
	}
	// An open transaction: the LSO stays at its first record.
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p1.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hw := ends[topic][0].Offset
	lsos, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if lso := lsos[topic][0].Offset; lso >= hw {
		t.Fatalf("read_committed end offset %d, HW %d: want the LSO below the HW while a transaction is open", lso, hw)
	}
	if err := p1.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	committed, all = append(committed, "open"), append(all, "open")
	txnRun(t, ctx, p1, true, "end")

	if got := consumeUntil(t, c, topic, kgo.ReadCommitted(), "end"); !slices.Equal(got, committed) {
		t.Fatalf("read_committed read %v, want %v", got, committed)
	}
	if got := consumeUntil(t, c, topic, kgo.ReadUncommitted(), "end"); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted read %v, want %v", got, all)
	}

	// A zombie: a new producer with the same transactional id fences p1.
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p1.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p2 := clustertest.NewClient(t, c, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic))
	txnRun(t, ctx, p2, true, "after-fence")
	err = p1.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("zombie commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	txnRun(t, ctx, p2, true, "end2")
	got := consumeUntil(t, c, topic, kgo.ReadCommitted(), "end2")
	if slices.Contains(got, "zombie") || !slices.Contains(got, "after-fence") {
		t.Fatalf("after the fence read_committed read %v: want after-fence and no zombie record", got)
	}
}

// TestGroupTransactSession: a consume-transform-produce loop with franz-go's
// GroupTransactSession (AddOffsetsToTxn, TxnOffsetCommit with KIP-447's generation and
// member): a first transaction is aborted (its output and its offsets vanish), the next ones
// commit; the output holds exactly one transformed record per input record for a
// read_committed reader, and the group's committed offset is the input's end.
func TestGroupTransactSession(t *testing.T) {
	c := txnCluster(t)
	for _, topic := range []string{"in", "out"} {
		if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := clustertest.Context(t)
	src := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("in"))
	const n = 20
	for i := 0; i < n; i++ {
		if err := src.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...), kgo.TransactionalID("etl-1"), kgo.DefaultProduceTopic("out"),
		kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	seen, aborted := 0, false
	for seen < n {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("session: %v after %d records", err, seen)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		k := 0
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("x"), r.Value...)}, nil)
			k++
		})
		commit := aborted || k == 0
		t.Logf("poll: %d records, errors %v, commit %v", k, fs.Errors(), commit)
		committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			t.Fatalf("end (commit %v): %v", commit, err)
		}
		if k > 0 && !commit {
			aborted = true // the session rewinds to the last committed offsets
			continue
		}
		if committed {
			seen += k
		}
	}
	txnRun(t, ctx, clustertest.NewClient(t, c, kgo.TransactionalID("etl-end"), kgo.DefaultProduceTopic("out")), true, "end")
	got := consumeUntil(t, c, "out", kgo.ReadCommitted(), "end")
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint("x", i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed output %v, want %v", got, want)
	}
	offs, err := kadm.NewClient(clustertest.NewClient(t, c)).FetchOffsets(ctx, "etl")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("in", 0); !ok || o.At != n {
		t.Fatalf("committed offset of in-0: %+v (found %v), want %d", o, ok, n)
	}
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// endOffsets returns the HW and the LSO of topic-0 (ListOffsets read_uncommitted and
// read_committed), or -1, -1 while they cannot be had (a leader election).
func endOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) (hw, lso int64) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Logf("ListOffsets: %v", err)
		return -1, -1
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Logf("ListOffsets read_committed: %v", err)
		return -1, -1
	}
	e, l := ends[topic][0], lsos[topic][0]
	if e.Err != nil || l.Err != nil {
		return -1, -1
	}
	return e.Offset, l.Offset
}

// TestTransactionTimeoutAbort: a transaction open longer than transaction.timeout.ms is
// aborted by the coordinator (the LSO moves up to the HW) and its producer is fenced.
func TestTransactionTimeoutAbort(t *testing.T) {
	c := clustertest.Start(t, 3, func(c *cluster.Config) {
		c.Txn.NumPartitions = 3
		c.Txn.AbortCheckIntervalMs = 50
	})
	if err := c.CreateTopic("slow", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("slow-1"), kgo.DefaultProduceTopic("slow"), kgo.TransactionTimeout(300*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	waitFor(t, "the coordinator to abort the expired transaction", func() bool {
		hw, lso := endOffsets(t, ctx, adm, "slow")
		return hw == 2 && lso == 2 // the record and the ABORT marker
	})
	waitFor(t, "the abort to complete (DescribeTransactions)", func() bool {
		dt, err := adm.DescribeTransactions(ctx, "slow-1")
		d, ok := dt["slow-1"]
		return err == nil && ok && d.State == "CompleteAbort"
	})
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("commit of the aborted transaction succeeded")
	}
	lt, err := adm.ListTransactions(ctx, nil, []string{"CompleteAbort"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := lt.TransactionalIDs(); !slices.Equal(ids, []string{"slow-1"}) {
		t.Fatalf("list CompleteAbort: %v", ids)
	}
}

// TestTransactionLeaderFailover: the leader of a partition with an open transaction is
// killed; the new leader, which rebuilt the producer state from what it replicated, holds the
// LSO at the transaction's first record; the commit after the failover writes its marker
// through the new leader and read_committed sees the transaction whole.
func TestTransactionLeaderFailover(t *testing.T) {
	c := txnCluster(t)
	const topic = "fo"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("fo-1"), kgo.DefaultProduceTopic(topic))
	txnRun(t, ctx, p, true, "c0")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"o1", "o2"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	hw, lso := endOffsets(t, ctx, adm, topic)
	if hw != 4 || lso != 2 {
		t.Fatalf("before the failover: HW %d LSO %d, want 4 and 2", hw, lso)
	}
	st, _ := c.Controller().Partition(topic, 0)
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new leader", func() bool {
		s, _ := c.Controller().Partition(topic, 0)
		return s.Leader >= 0 && s.Leader != st.Leader
	})
	waitFor(t, "the new leader's LSO", func() bool {
		hw, lso = endOffsets(t, ctx, adm, topic)
		return hw == 4
	})
	if lso != 2 {
		t.Fatalf("new leader: HW %d LSO %d, want the LSO at the open transaction's first offset 2", hw, lso)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txnRun(t, ctx, p, true, "end")
	if got := consumeUntil(t, c, topic, kgo.ReadCommitted(), "end"); !slices.Equal(got, []string{"c0", "o1", "o2"}) {
		t.Fatalf("read_committed after the failover: %v", got)
	}
}

// TestTransactionCoordinatorMove: the broker coordinating a transactional id is killed while
// its transaction is open; the new leader of its __transaction_state partition reloads the
// state, and the producer commits through it.
func TestTransactionCoordinatorMove(t *testing.T) {
	c := txnCluster(t)
	const topic = "mv"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("mv-1"), kgo.DefaultProduceTopic(topic))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tp := txn.PartitionFor("mv-1", 5)
	st, ok := c.Controller().Partition(txn.StateTopic, tp)
	if !ok {
		t.Fatalf("%s-%d unknown", txn.StateTopic, tp)
	}
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit through the new coordinator: %v", err)
	}
	txnRun(t, ctx, p, true, "end")
	if got := consumeUntil(t, c, topic, kgo.ReadCommitted(), "end"); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("read_committed after the coordinator move: %v", got)
	}
}

// TestTxnOffsetsRequireStable: offsets committed in an open transaction are not visible to
// OffsetFetch; with require_stable (KIP-447) their partitions answer UNSTABLE_OFFSET_COMMIT
// until the transaction commits, then the committed offset.
func TestTxnOffsetsRequireStable(t *testing.T) {
	c := txnCluster(t)
	if err := c.CreateTopic("st", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("st-1"), kgo.DefaultProduceTopic("st"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "st-1", pid, epoch, "st-group"
	if r, err := ao.RequestWith(ctx, p); err != nil || r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v code %d", err, r.ErrorCode)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "st-1", "st-group", pid, epoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "st"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 1
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	if r, err := tc.RequestWith(ctx, p); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, r)
	}
	fetch := func(stable bool) (int64, int16) {
		t.Helper()
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group, of.RequireStable = "st-group", stable
		ot := kmsg.NewOffsetFetchRequestTopic()
		ot.Topic, ot.Partitions = "st", []int32{0}
		of.Topics = append(of.Topics, ot)
		r, err := of.RequestWith(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Groups) > 0 { // v8+
			rp := r.Groups[0].Topics[0].Partitions[0]
			return rp.Offset, rp.ErrorCode
		}
		rp := r.Topics[0].Partitions[0]
		return rp.Offset, rp.ErrorCode
	}
	if off, code := fetch(false); off != -1 || code != 0 {
		t.Fatalf("before the commit: offset %d code %d, want -1 (not visible)", off, code)
	}
	if _, code := fetch(true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable before the commit: code %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the committed offset", func() bool {
		off, code := fetch(true)
		return off == 1 && code == 0
	})
}

// TestTransactionalIDExpiration: transactional.id.expiration.ms and
// transaction.remove.expired.transaction.cleanup.interval.ms, given as settings by name (as
// `serve --set` gives them), reach the coordinator: a transactional id idle past its
// expiration is forgotten (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND) and its next
// InitProducerId gets a new producer id.
func TestTransactionalIDExpiration(t *testing.T) {
	c := clustertest.Start(t, 3, func(c *cluster.Config) {
		c.Txn.NumPartitions = 3
		for k, v := range map[string]string{
			"transactional.id.expiration.ms":                             "200",
			"transaction.remove.expired.transaction.cleanup.interval.ms": "50",
		} {
			if err := c.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := c.CreateTopic("idle", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p := clustertest.NewClient(t, c, kgo.TransactionalID("idle-1"), kgo.DefaultProduceTopic("idle"))
	txnRun(t, ctx, p, true, "a")
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	dt, err := adm.DescribeTransactions(ctx, "idle-1")
	if err != nil {
		t.Fatal(err)
	}
	first := dt["idle-1"].ProducerID
	p.Close()
	waitFor(t, "idle-1 to expire (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND)", func() bool {
		dt, err := adm.DescribeTransactions(ctx, "idle-1")
		var ke *kerr.Error
		if err == nil {
			d, ok := dt["idle-1"]
			return ok && errors.As(d.Err, &ke) && ke == kerr.TransactionalIDNotFound
		}
		return errors.As(err, &ke) && ke == kerr.TransactionalIDNotFound
	})
	p2 := clustertest.NewClient(t, c, kgo.TransactionalID("idle-1"), kgo.DefaultProduceTopic("idle"))
	txnRun(t, ctx, p2, true, "b")
	dt, err = adm.DescribeTransactions(ctx, "idle-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := dt["idle-1"].ProducerID; got == first {
		t.Fatalf("after expiry idle-1 kept producer id %d", got)
	}
}

// TestReadCommittedAcrossSegments: two transactional producers interleave, one aborting
// while the other's transaction is open, on a topic whose segments hold a few batches, so
// aborted transactions start in one segment and end in another (their .txnindex entries live
// with the ABORT markers). read_committed consumers fetching a little at a time see exactly
// the committed records; every Fetch answer lists the aborted transactions of its range
// (marker at or past the fetch offset, first record below its end) and, over the whole log,
// every aborted producer's transactions.
func TestReadCommittedAcrossSegments(t *testing.T) {
	c := txnCluster(t)
	const topic = "txseg"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2", "segment.bytes": "1024"}); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	p1 := clustertest.NewClient(t, c, kgo.TransactionalID("seg-1"), kgo.DefaultProduceTopic(topic))
	p2 := clustertest.NewClient(t, c, kgo.TransactionalID("seg-2"), kgo.DefaultProduceTopic(topic))
	produce := func(cl *kgo.Client, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v + strings.Repeat(".", 200))}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	var committed []string
	aborts := 0
	for round := 0; round < 6; round++ {
		if err := p1.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p2.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var v1, v2 []string
		for i := 0; i < 4; i++ {
			a, b := fmt.Sprintf("p1-%d-%d", round, i), fmt.Sprintf("p2-%d-%d", round, i)
			produce(p1, a)
			produce(p2, b)
			v1, v2 = append(v1, a), append(v2, b)
		}
		c1, c2 := round%2 == 0, round%3 == 0
		if err := p1.EndTransaction(ctx, kgo.TransactionEndTry(c1)); err != nil {
			t.Fatal(err)
		}
		if err := p2.EndTransaction(ctx, kgo.TransactionEndTry(c2)); err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct {
			commit bool
			vals   []string
		}{{c1, v1}, {c2, v2}} {
			if x.commit {
				committed = append(committed, x.vals...)
			} else {
				aborts++
			}
		}
	}
	// committed in offset order: both producers' records interleave
	var want []string
	for round := 0; round < 6; round++ {
		for i := 0; i < 4; i++ {
			for _, p := range []string{"p1", "p2"} {
				v := fmt.Sprintf("%s-%d-%d", p, round, i)
				if slices.Contains(committed, v) {
					want = append(want, v)
				}
			}
		}
	}
	txnRun(t, ctx, p1, true, "end")
	trim := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = strings.TrimRight(v, ".")
		}
		return out
	}
	cl := clustertest.NewClient(t, c, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(700), kgo.FetchMaxBytes(700))
	var got []string
	for !slices.Contains(got, "end") {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming: %v after %v", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, strings.TrimRight(string(r.Value), ".")) })
	}
	if got = got[:len(got)-1]; !slices.Equal(got, want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	if gotU := trim(consumeUntil(t, c, topic, kgo.ReadUncommitted(), "end")); len(gotU) != 48 {
		t.Fatalf("read_uncommitted read %d records, want 48", len(gotU))
	}

	// Raw Fetches at read_committed, one small range at a time.
	st, _ := c.Controller().Partition(topic, 0)
	raw := clustertest.NewClient(t, c)
	tds, err := kadm.NewClient(raw).ListTopics(ctx, topic) // learns the brokers too
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{} // (producer id, first offset) of every aborted transaction listed
	for off := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID = -1
		req.MaxBytes = 600
		req.IsolationLevel = 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, tds[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 600
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw.Broker(int(st.Leader)))
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		end := batchesEnd(t, p.RecordBatches)
		if end <= off {
			if off < p.LastStableOffset {
				t.Fatalf("fetch at %d returned nothing below the LSO %d", off, p.LastStableOffset)
			}
			break
		}
		for _, a := range p.AbortedTransactions {
			if a.FirstOffset >= end {
				t.Fatalf("fetch [%d, %d) lists an aborted transaction starting at %d", off, end, a.FirstOffset)
			}
			seen[[2]int64{a.ProducerID, a.FirstOffset}] = true
		}
		off = end
	}
	if len(seen) != aborts {
		t.Fatalf("the Fetch answers listed %d aborted transactions %v, want %d", len(seen), seen, aborts)
	}
}

// batchesEnd returns the offset after the last whole batch of b (0 when none).
func batchesEnd(t *testing.T, b []byte) int64 {
	t.Helper()
	var end int64
	for len(b) >= 61 {
		var rb kmsg.RecordBatch
		n := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
		if n > len(b) {
			break
		}
		if err := rb.ReadFrom(b[:n]); err != nil {
			t.Fatalf("batch: %v", err)
		}
		end = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		b = b[n:]
	}
	return end
}
