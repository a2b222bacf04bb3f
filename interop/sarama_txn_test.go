package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
)

// readCommitted reads topic-0 from the start with a franz-go read_committed consumer until it
// has read the value last, and returns the values before it.
func readCommitted(t *testing.T, c *cluster.Cluster, topic, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed %s: %v after %v", topic, ctx.Err(), got)
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

// TestTransactionsSarama: sarama's transactional producer commits and aborts, commits a
// group's offset inside a transaction (AddOffsetsToTxn), and is fenced by a second producer
// with the same transactional id; a read_committed reader sees the committed records only.
func TestTransactionsSarama(t *testing.T) {
	const name = "sarama"
	c := startClusterWith(t, nil)
	const topic = "interop-txn-sarama"
	createTopic(t, c, topic, 1)
	boot := strings.Split(c.Bootstrap(), ",")
	config := func() *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.ClientID = "isrbench-interop"
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Idempotent = true
		cfg.Producer.Transaction.ID = "sarama-txn"
		cfg.Net.MaxOpenRequests = 1
		return cfg
	}
	step := func(op string, fn func() error) bool {
		t.Helper()
		start := time.Now()
		if err := fn(); err != nil {
			recordTxn(name, op, "error: "+oneLine(err.Error()))
			t.Errorf("%s: %s: %v", name, op, err)
			return false
		}
		recordTxn(name, op, fmt.Sprintf("works (%.1f s)", time.Since(start).Seconds()))
		return true
	}
	p, err := sarama.NewSyncProducer(boot, config())
	if err != nil {
		recordTxn(name, txnOperations[0], "error: "+oneLine(err.Error()))
		t.Fatal(err)
	}
	defer p.Close()
	txn := func(commit bool, vals ...string) error {
		if err := p.BeginTxn(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, v := range vals {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
				return fmt.Errorf("send %s: %w", v, err)
			}
		}
		if commit {
			return p.CommitTxn()
		}
		return p.AbortTxn()
	}
	var committed []string
	if !step(txnOperations[0], func() error {
		for i := 0; i < 6; i++ {
			vals := []string{fmt.Sprintf("s%d-a", i), fmt.Sprintf("s%d-b", i)}
			if err := txn(i%2 == 0, vals...); err != nil {
				return err
			}
			if i%2 == 0 {
				committed = append(committed, vals...)
			}
		}
		if err := txn(true, "end"); err != nil {
			return err
		}
		if got := readCommitted(t, c, topic, "end"); !slices.Equal(got, committed) {
			return fmt.Errorf("read_committed read %v, want %v", got, committed)
		}
		return nil
	}) {
		return
	}
	step(txnOperations[1], func() error {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("with-offsets")}); err != nil {
			return err
		}
		offs := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: 3}}}
		if err := p.AddOffsetsToTxn(offs, "sarama-txn-group"); err != nil {
			return fmt.Errorf("add offsets: %w", err)
		}
		if err := p.CommitTxn(); err != nil {
			return err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(boot...))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := kadm.NewClient(cl).FetchOffsets(ctx, "sarama-txn-group")
		if err != nil {
			return err
		}
		if o, ok := got.Lookup(topic, 0); !ok || o.At != 3 {
			return fmt.Errorf("group offset %+v (found %v), want 3", o, ok)
		}
		return nil
	})
	step(txnOperations[2], func() error {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("zombie")}); err != nil {
			return err
		}
		p2, err := sarama.NewSyncProducer(boot, config())
		if err != nil {
			return fmt.Errorf("second producer: %w", err)
		}
		defer p2.Close()
		if err := p.CommitTxn(); err == nil {
			return fmt.Errorf("the zombie's commit succeeded")
		}
		if err := p2.BeginTxn(); err != nil {
			return err
		}
		if _, _, err := p2.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("end2")}); err != nil {
			return err
		}
		if err := p2.CommitTxn(); err != nil {
			return err
		}
		if got := readCommitted(t, c, topic, "end2"); slices.Contains(got, "zombie") {
			return fmt.Errorf("read_committed read the zombie's record: %v", got)
		}
		return nil
	})
}
