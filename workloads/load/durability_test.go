package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// TestCheckDurability writes a scripted partition (a lost record, a duplicate, a reordered
// record, a foreign record) and checks the verdict.
func TestCheckDurability(t *testing.T) {
	const pid = 77
	// Partition 0 holds seqs 0 1 3 2 2 (4 is lost) and a record of another writer.
	ctx, seeds := scriptedPartition(t, "d", val(pid, 0), val(pid, 1), val(pid, 3), val(pid, 2), val(pid, 2), []byte("not ours"), val(pid+1, 0))
	p := &Producer{ID: pid, spec: spec.ProducerSpec{Acks: "all"}}
	for seq := uint64(0); seq < 5; seq++ {
		p.acked.set(seq)
	}
	dc, by, err := CheckDurability(ctx, []kgo.Opt{kgo.SeedBrokers(seeds...)}, "d", []int64{0}, []int64{0}, []int64{7}, []*Producer{p})
	if err != nil {
		t.Fatal(err)
	}
	want := results.DurabilityCounts{Acked: 5, Verified: 4, Lost: 1, Duplicated: 1, OutOfOrder: 1}
	if dc != want || by["all"] != want || len(by) != 1 {
		t.Fatalf("durability %+v (by acks %+v), want %+v", dc, by, want)
	}
	// Reading past what exists cannot finish: the check reports which partition is short.
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if _, _, err := CheckDurability(short, []kgo.Opt{kgo.SeedBrokers(seeds...)}, "d", []int64{0}, []int64{0}, []int64{9}, []*Producer{p}); err == nil ||
		!strings.Contains(err.Error(), "0 at 7 of [0, 9)") {
		t.Fatalf("short read: %v", err)
	}
}

// TestCheckDurabilityExpiredProducer: retention deleted [0, 3) of a partition. Producer A
// wrote only there (offsets 0 and 1): nothing of it is left, and its highest acknowledged
// offset is below the read-back's start, so both records expired. Producer B (offsets 2, 3,
// 4) lost seq 0 to retention and kept the rest. Producer C acknowledged offset 5, above the
// start, and nothing of it is there: lost, not expired.
func TestCheckDurabilityExpiredProducer(t *testing.T) {
	const a, b, c = 10, 11, 12
	ctx, seeds := scriptedPartition(t, "e", val(a, 0), val(a, 1), val(b, 0), val(b, 1), val(b, 2))
	prod := func(id uint32, offs ...int64) *Producer {
		p := &Producer{ID: id, spec: spec.ProducerSpec{Acks: "all"}}
		for seq, o := range offs {
			p.acked.set(uint64(seq))
			p.ackPart.set(uint64(seq), 0)
			p.noteTop(0, o)
		}
		return p
	}
	prods := []*Producer{prod(a, 0, 1), prod(b, 2, 3, 4), prod(c, 5)}
	dc, _, err := CheckDurability(ctx, []kgo.Opt{kgo.SeedBrokers(seeds...)}, "e", []int64{0}, []int64{3}, []int64{5}, prods)
	if err != nil {
		t.Fatal(err)
	}
	want := results.DurabilityCounts{Acked: 6, Verified: 2, Expired: 3, Lost: 1}
	if dc != want {
		t.Fatalf("durability %+v, want %+v", dc, want)
	}
}

// scriptedPartition creates topic (one partition) on a kfake cluster and writes values to it in
// order; it returns a context for the test and the cluster's seeds.
func scriptedPartition(t *testing.T, topic string, values ...[]byte) (context.Context, []string) {
	t.Helper()
	seeds := newKfake(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v, Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, seeds
}

func val(pid uint32, seq uint64) []byte {
	b := make([]byte, HeaderSize+8)
	PutHeader(b, Header{ProducerID: pid, Seq: seq, Intended: time.Now().UnixNano()})
	return b
}

func TestBitset(t *testing.T) {
	var b bitset
	for _, i := range []uint64{0, 63, 64, 1000, 5000} {
		if b.set(i) {
			t.Fatalf("%d already set", i)
		}
	}
	if !b.set(1000) || !b.has(5000) || b.has(5001) || b.has(1<<40) || b.count() != 5 {
		t.Fatalf("bitset %v", b.count())
	}
}

// TestCheckDurabilityClientError: a read-back that cannot even start is an error, not a
// clean verdict of zero records.
func TestCheckDurabilityClientError(t *testing.T) {
	p := &Producer{ID: 1, spec: spec.ProducerSpec{Acks: "all"}}
	p.acked.set(0)
	p.acked.set(1)
	dc, _, err := CheckDurability(context.Background(), []kgo.Opt{kgo.SeedBrokers("host:notaport")}, "d", []int64{0}, []int64{0}, []int64{2}, []*Producer{p})
	if err == nil {
		t.Fatalf("no error; counts %+v", dc)
	}
	if dc.Acked != 2 || dc.Verified != 0 {
		t.Fatalf("counts %+v, want Acked 2 (nothing verified)", dc)
	}
}

func TestPartLog(t *testing.T) {
	var l partLog
	l.set(0, 3)
	l.set(200, 254)
	if l.get(0) != 3 || l.get(200) != 254 || l.get(5) != 0 || l.get(1<<20) != 0 || l.b16 != nil {
		t.Fatalf("byte log: %d %d", l.get(0), l.get(200))
	}
	l.set(7, 9999) // widens
	if l.get(0) != 3 || l.get(200) != 254 || l.get(7) != 9999 || l.b8 != nil {
		t.Fatalf("wide log: %d %d %d", l.get(0), l.get(200), l.get(7))
	}
}

// newKfake starts a three-broker kfake cluster for the test and returns its addresses.
func newKfake(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
