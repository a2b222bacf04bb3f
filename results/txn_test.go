package results

import (
	"bytes"
	"strings"
	"testing"
)

// txnResult is fakeResult of a transactional run: commit latency, LSO lag, read_committed e2e
// and the transactions' verdict.
func txnResult(records float64, commitP50, commitP99 float64) *Result {
	r := fakeResult("transactions", "r", cfg("acks", "all", "producers.transaction.records", records), 2000, 900, 4000)
	c, l, e := NewHistogram(), NewHistogram(), NewHistogram()
	c.RecordN(int64(commitP50), 90)
	c.RecordN(int64(commitP99), 10)
	l.RecordN(int64(commitP50/2), 1000)
	e.RecordN(int64(commitP99), 1000)
	cs, ls, es := Summarize(c), Summarize(l), Summarize(e)
	r.CommitLatencyUs, r.LSOLagUs, r.E2EReadCommittedUs = &cs, &ls, &es
	r.Transactions = &Transactions{Committed: 18, Aborted: 2, CommittedRecords: 1800, AbortedRecords: 200,
		Verify: TxnVerify{Whole: 18, Visible: 1800}}
	return r
}

func TestTransactionalRunOutputs(t *testing.T) {
	r := txnResult(100, 2000, 9000)
	r.Transactions.Errors = map[string]int64{"END_TXN:CONCURRENT_TRANSACTIONS": 2}
	var sum bytes.Buffer
	if err := PrintSummary(&sum, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"commit", "lso lag", "e2e read_committed", "transactions: 18 committed (1800 records), 2 aborted (200 records)", "0 anomalies", "transaction errors: END_TXN:CONCURRENT_TRANSACTIONS=2"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var sw bytes.Buffer
	if err := PrintSweep(&sw, []*Result{txnResult(10, 500, 900), r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sw.String(), "commit") || !strings.Contains(sw.String(), "lso-lag") || !strings.Contains(sw.String(), "e2e-rc") {
		t.Errorf("sweep table lacks the transaction columns:\n%s", sw.String())
	}
	var bench bytes.Buffer
	if err := WriteBench(&bench, r); err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"p50-commit-µs", "p99-commit-µs", "p99-lsolag-µs", "p99-e2erc-µs"} {
		if !strings.Contains(bench.String(), unit) {
			t.Errorf("bench.txt lacks %s: %s", unit, bench.String())
		}
	}
	// The gate's metrics: present in a transactional run, absent (not a sample) elsewhere.
	m := Metrics()["p99-commit"]
	if v, ok := m.Get(r); !ok || v != r.CommitLatencyUs.P99 {
		t.Errorf("p99-commit = %v, %v", v, ok)
	}
	if _, ok := m.Get(fakeResult("default", "r", nil, 1, 1, 1)); ok {
		t.Error("p99-commit of an ordinary run counts as a sample")
	}
	rep, err := Compare([]*Result{r, r, r}, []*Result{r, r, r}, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, row := range rep.Groups[0].Rows {
		names = append(names, row.Metric)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "p99-commit") || !strings.Contains(got, "p99-lsolag") || !strings.Contains(got, "p99-e2erc") {
		t.Errorf("compare metrics %s", got)
	}
}

func TestOrdinarySummaryHasNoTransactionRows(t *testing.T) {
	var sum bytes.Buffer
	if err := PrintSummary(&sum, fakeResult("default", "r", nil, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if s := sum.String(); strings.Contains(s, "commit") || strings.Contains(s, "lso") || strings.Contains(s, "transactions") {
		t.Errorf("an ordinary run's summary mentions transactions:\n%s", s)
	}
}

func TestMergeTransactions(t *testing.T) {
	a := txnResult(100, 2000, 9000).Transactions
	b := *a
	b.Verify.AbortedSeen, b.Verify.Anomalies = 1, 1
	b.Errors = map[string]int64{"END_TXN:CONCURRENT_TRANSACTIONS": 2}
	var m *Transactions
	for _, w := range []*Transactions{a, nil, &b} {
		m = mergeTransactions(m, w)
	}
	if m.Committed != 36 || m.CommittedRecords != 3600 || m.Verify.Whole != 36 || m.Verify.Anomalies != 1 || m.Errors["END_TXN:CONCURRENT_TRANSACTIONS"] != 2 {
		t.Fatalf("merged %+v", m)
	}
	if a.Committed != 18 || a.Errors != nil {
		t.Fatalf("merge changed a worker's figures: %+v", a)
	}
}
