package interop

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestTransactionsToDo marks the clients whose transactional producers the suite does not
// drive yet, so that the table says so.
func TestTransactionsToDo(t *testing.T) {
	for _, c := range []string{"kafkajs"} {
		for _, op := range txnOperations[:3] {
			recordTxn(c, op, "to-do: not in the suite yet")
		}
	}
}
