package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestZombieFenced: a producer restarted with the same transactional.id fences the first
// (a zombie): the zombie's open transaction is aborted, its EndTxn says so and stops it; the
// new producer commits, and the read_committed check sees its transaction whole and none of
// the zombie's records.
func TestZombieFenced(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	adm, err := kgo.NewClient(conn...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, "z"); err != nil {
		t.Fatal(err)
	}
	ps := spec.DefaultSpec().Producers
	ps.MessageSize, ps.Rate, ps.Txn.ID, ps.Txn.Records = 64, 0, "zombie", 5
	win := Window{Start: 0, End: 1 << 62}
	newProd := func(id uint32) *Producer {
		p, err := NewProducer(id, conn, ps, "z", 0, win, WaitSpin, spec.TransactionalID(ps.Txn.ID, 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	send := func(p *Producer, from, to uint64) {
		for seq := from; seq < to; seq++ {
			if err := p.beginTxn(seq, time.Now().UnixNano()); err != nil {
				t.Fatal(err)
			}
			r := p.pool.Get().(*kgo.Record)
			PutHeader(r.Value, Header{ProducerID: p.ID, Seq: seq, Intended: time.Now().UnixNano()})
			p.inFl.Add(1)
			p.cl.Produce(ctx, r, p.promise)
		}
		if err := p.cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	zombie := newProd(1)
	send(zombie, 0, 5) // an open transaction
	fresh := newProd(2)
	send(fresh, 0, 5) // InitProducerId of the same id: the zombie's transaction is aborted
	if err := fresh.endTxn(ctx, 5); err != nil {
		t.Fatal(err)
	}
	err = zombie.endTxn(ctx, 5)
	if err == nil || !strings.Contains(err.Error(), "fenced by another producer") {
		t.Fatalf("the zombie's EndTxn: %v, want fenced", err)
	}
	end, err := kadm.NewClient(adm).ListEndOffsets(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := end.Lookup("z", 0)
	v := CheckTransactions(ctx, conn, "z", []int64{0}, []int64{o.Offset}, []*Producer{zombie, fresh})
	committed, aborted, _, _, _, errs := TxnCounts([]*Producer{zombie, fresh})
	if v.Whole != 1 || v.Visible != 5 || v.Anomalies != 0 || committed != 1 || aborted != 1 || len(errs) == 0 {
		t.Fatalf("verdict %+v, committed %d aborted %d, errors %v", v, committed, aborted, errs)
	}
}
