package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Operations of the client x transaction table (TestMain prints it after the suite's).
var txnOperations = []string{"commit + abort", "send offsets in txn", "zombie fenced", "read_committed consumer", "read_uncommitted consumer"}

var txnTable = struct {
	sync.Mutex
	rows map[string]map[string]string
}{rows: map[string]map[string]string{}}

func recordTxn(client, op, outcome string) {
	txnTable.Lock()
	defer txnTable.Unlock()
	if txnTable.rows[client] == nil {
		txnTable.rows[client] = map[string]string{}
	}
	txnTable.rows[client][op] = outcome
}

// txnTableText is the client x transaction table in Markdown ("" when nothing ran).
func txnTableText() string {
	txnTable.Lock()
	defer txnTable.Unlock()
	if len(txnTable.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nclient x transaction operation (isrbench interop suite)\n\n| client | " + strings.Join(txnOperations, " | ") + " |\n|---|")
	b.WriteString(strings.Repeat("---|", len(txnOperations)) + "\n")
	for _, c := range slices.Sorted(mapKeys(txnTable.rows)) {
		b.WriteString("| " + c + " |")
		for _, op := range txnOperations {
			v := txnTable.rows[c][op]
			if v == "" {
				v = "n/a"
			}
			b.WriteString(" " + v + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestTransactionsPythonKcat: confluent-kafka-python's transactional producer commits some
// transactions and aborts others (send_offsets_to_transaction in the last committed one); a
// kcat read_committed consumer reads exactly the committed records, in order, and a
// read_uncommitted one every record; a second producer with the same transactional id fences
// the first.
func TestTransactionsPythonKcat(t *testing.T) {
	needPython(t, "confluent-kafka-python", "confluent_kafka")
	kcat := needKcat(t)
	c := startClusterWith(t, nil)
	boot := c.Bootstrap()
	const topic, txns, per = "interop-txn", 10, 5
	createTopic(t, c, topic, 1)
	step := func(client, op string, fn func() error) bool {
		t.Helper()
		start := time.Now()
		if err := fn(); err != nil {
			recordTxn(client, op, "error: "+oneLine(err.Error()))
			t.Errorf("%s: %s: %v", client, op, err)
			return false
		}
		recordTxn(client, op, fmt.Sprintf("works (%.1f s)", time.Since(start).Seconds()))
		return true
	}
	py := func(args ...string) (string, error) {
		return command(120*time.Second, "python", python(), append([]string{"confluent_txn.py"}, args...)...)
	}
	var committed []string
	var groupOffset string
	if !step("confluent-kafka-python", txnOperations[0], func() error {
		out, err := py("txn", boot, topic, "py-txn", fmt.Sprint(txns), fmt.Sprint(per), "py-txn-group")
		if err != nil {
			return err
		}
		for _, l := range lines(out) {
			if strings.HasPrefix(l, "group-offset ") {
				groupOffset = strings.TrimPrefix(l, "group-offset ")
				continue
			}
			committed = append(committed, l)
		}
		if len(committed) != (txns+1)/2*per {
			return fmt.Errorf("%d committed records printed, want %d", len(committed), (txns+1)/2*per)
		}
		return nil
	}) {
		return
	}
	step("confluent-kafka-python", txnOperations[1], func() error {
		if want := fmt.Sprint(txns - 2); groupOffset != want {
			return fmt.Errorf("group offset after the transaction %q, want %s", groupOffset, want)
		}
		return nil
	})
	kc := func(iso string) ([]string, error) {
		out, err := command(60*time.Second, "", kcat, "-C", "-b", boot, "-t", topic, "-X", "isolation.level="+iso, "-o", "beginning", "-e", "-q", "-f", "%s\n")
		return lines(out), err
	}
	step("kcat", txnOperations[3], func() error {
		got, err := kc("read_committed")
		if err != nil {
			return err
		}
		if !slices.Equal(got, committed) {
			return fmt.Errorf("read_committed read %d records %v, want the %d committed ones", len(got), got, len(committed))
		}
		return nil
	})
	step("kcat", txnOperations[4], func() error {
		got, err := kc("read_uncommitted")
		if err != nil {
			return err
		}
		if len(got) != txns*per {
			return fmt.Errorf("read_uncommitted read %d records, want %d (committed and aborted)", len(got), txns*per)
		}
		return nil
	})
	step("confluent-kafka-python", txnOperations[2], func() error {
		out, err := py("zombie", boot, topic, "py-txn")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "fenced: ") {
			return fmt.Errorf("the zombie's commit was not refused: %s", oneLine(out))
		}
		got, err := kc("read_committed")
		if err != nil {
			return err
		}
		if slices.Contains(got, "zombie") || !slices.Contains(got, "after-zombie") {
			return fmt.Errorf("read_committed after the fence: %v, want after-zombie and no zombie", got)
		}
		return nil
	})
}

// TestTransactionsKafkajs: kafkajs transactions (commit, abort, sendOffsets) and a zombie
// fenced by a second producer with the same transactional id; a franz-go read_committed reader
// sees exactly the committed records.
func TestTransactionsKafkajs(t *testing.T) {
	const name = "kafkajs"
	var err error
	if _, lerr := exec.LookPath("node"); lerr != nil {
		err = fmt.Errorf("node: %v", lerr)
	} else if _, serr := os.Stat("js/node_modules/kafkajs/package.json"); serr != nil {
		err = errors.New("js/node_modules/kafkajs is missing: run npm ci in interop/js")
	}
	if err != nil {
		recordTxn(name, txnOperations[0], "missing: "+err.Error())
	}
	need(t, name, err)
	c := startClusterWith(t, nil)
	const topic = "interop-txn-kafkajs"
	createTopic(t, c, topic, 1)
	boot := c.Bootstrap()
	js := func(args ...string) (string, error) {
		return command(120*time.Second, "js", "node", append([]string{"client.js"}, args...)...)
	}
	step := func(op string, fn func() error) {
		t.Helper()
		start := time.Now()
		if err := fn(); err != nil {
			recordTxn(name, op, "error: "+oneLine(err.Error()))
			t.Errorf("%s: %s: %v", name, op, err)
			return
		}
		recordTxn(name, op, fmt.Sprintf("works (%.1f s)", time.Since(start).Seconds()))
	}
	step(txnOperations[0], func() error {
		out, err := js("txn", boot, topic, "js-txn", "js-txn-group")
		if err != nil {
			return err
		}
		if _, err := js("txn", boot, topic+"-end", "js-txn-end", "js-txn-group-end"); err != nil {
			return err
		}
		committed := lines(out)
		if len(committed) != 6 {
			return fmt.Errorf("%d committed values printed, want 6", len(committed))
		}
		p, err := command(60*time.Second, "js", "node", "client.js", "produce", boot, topic, "1000", "1")
		if err != nil {
			return fmt.Errorf("end marker: %v: %s", err, p)
		}
		if got := readCommitted(t, c, topic, "1000"); !slices.Equal(got, committed) {
			return fmt.Errorf("read_committed read %v, want %v", got, committed)
		}
		return nil
	})
	step(txnOperations[1], func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(boot, ",")...))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := kadm.NewClient(cl).FetchOffsets(ctx, "js-txn-group")
		if err != nil {
			return err
		}
		if o, ok := got.Lookup(topic, 0); !ok || o.At != 3 {
			return fmt.Errorf("group offset %+v (found %v), want 3", o, ok)
		}
		return nil
	})
	step(txnOperations[2], func() error {
		out, err := js("zombie", boot, topic, "js-txn")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "fenced: ") {
			return fmt.Errorf("the zombie's commit was not refused: %s", oneLine(out))
		}
		p, err := command(60*time.Second, "js", "node", "client.js", "produce", boot, topic, "2000", "1")
		if err != nil {
			return fmt.Errorf("end marker: %v: %s", err, p)
		}
		if got := readCommitted(t, c, topic, "2000"); slices.Contains(got, "zombie") || !slices.Contains(got, "after-zombie") {
			return fmt.Errorf("read_committed after the fence: %v", got)
		}
		return nil
	})
}
