package results

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Transactions is result.json transactions: what the transactional producers and the
// exactly-once pipeline did and what the read_committed read-back after the run found.
type Transactions struct {
	// Committed, Aborted and Unknown count transactions by outcome (whole run): Unknown ones
	// got no confirmed EndTxn answer (the commit may or may not have been written; the
	// read-back must then find them whole or not at all).
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	Unknown   int64 `json:"unknown,omitempty"`
	// CommittedRecords and AbortedRecords are the records of those transactions.
	CommittedRecords int64 `json:"committed_records"`
	AbortedRecords   int64 `json:"aborted_records"`
	// Errors counts the transaction calls' errors by call and Kafka error name
	// ("END_TXN:CONCURRENT_TRANSACTIONS"); the records' own are in produced.errors.
	Errors map[string]int64 `json:"errors,omitempty"`
	// LSOLagResolutionUs is the LSO observer's poll interval (ListOffsets LATEST, both
	// isolation levels): lso_lag_us is measured to within it.
	LSOLagResolutionUs float64 `json:"lso_lag_resolution_us,omitempty"`
	// Verify is the read_committed read-back; Pipeline the pipeline's output check.
	Verify   TxnVerify    `json:"verify"`
	Pipeline *PipelineRun `json:"pipeline,omitempty"`
}

// TxnVerify is what a read_committed consumer read back from the HW before the load to the LSO
// after it. Anomalies is the sum of the counts that must be 0.
type TxnVerify struct {
	// Whole counts committed transactions seen with every record; Visible their records.
	Whole   int64 `json:"whole"`
	Visible int64 `json:"visible_records"`
	// Partial counts transactions (committed or unknown) of which some but not all records
	// were seen; MissingRecords the committed records not seen at all (their transaction lost).
	Partial        int64 `json:"partial"`
	MissingRecords int64 `json:"missing_records"`
	// AbortedSeen counts records of aborted transactions a read_committed read returned;
	// Duplicated records seen more than once.
	AbortedSeen int64 `json:"aborted_seen"`
	Duplicated  int64 `json:"duplicated"`
	Anomalies   int64 `json:"anomalies"`
	// Error is set when the read-back could not finish (the counts are then incomplete).
	Error string `json:"error,omitempty"`
}

// PipelineRun is the exactly-once pipeline's figures: its transactions and the check that its
// output topic holds exactly one transformed record per input record (read_committed).
type PipelineRun struct {
	OutputTopic string `json:"output_topic"`
	Committed   int64  `json:"committed"` // pipeline transactions committed
	Aborted     int64  `json:"aborted"`   // aborted (a rebalance or an error), their input read again
	// Inputs are the committed input records (every record of the benchmark topic a
	// read_committed reader sees), Outputs the transformed records read back from the output
	// topic; Missing inputs without an output, Duplicated inputs with more than one,
	// Malformed outputs that are not a transformation of an input.
	Inputs     int64  `json:"inputs"`
	Outputs    int64  `json:"outputs"`
	Missing    int64  `json:"missing"`
	Duplicated int64  `json:"duplicated"`
	Malformed  int64  `json:"malformed"`
	Error      string `json:"error,omitempty"`
}

// Anomalies is the sum of p's counts that must be 0.
func (p *PipelineRun) Anomalies() int64 {
	if p == nil {
		return 0
	}
	return p.Missing + p.Duplicated + p.Malformed
}

// printTransactions prints the transactions line of the summary (nothing for a run without).
func printTransactions(w io.Writer, t *Transactions) {
	if t == nil {
		return
	}
	v := t.Verify
	fmt.Fprintf(w, "transactions: %d committed (%d records), %d aborted (%d records), %d unknown; read_committed read-back: %d whole, %d partial, %d committed records missing, %d aborted records seen, %d duplicated: %d anomalies\n",
		t.Committed, t.CommittedRecords, t.Aborted, t.AbortedRecords, t.Unknown, v.Whole, v.Partial, v.MissingRecords, v.AbortedSeen, v.Duplicated, v.Anomalies)
	if len(t.Errors) > 0 {
		names := make([]string, 0, len(t.Errors))
		for k := range t.Errors {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			names[i] = fmt.Sprintf("%s=%d", k, t.Errors[k])
		}
		fmt.Fprintf(w, "transaction errors: %s\n", strings.Join(names, " "))
	}
	if p := t.Pipeline; p != nil {
		fmt.Fprintf(w, "pipeline -> %s: %d transactions committed, %d aborted; %d inputs, %d outputs, %d missing, %d duplicated, %d malformed\n",
			p.OutputTopic, p.Committed, p.Aborted, p.Inputs, p.Outputs, p.Missing, p.Duplicated, p.Malformed)
	}
}

// txnRows are the summary table's rows of a transactional run's histograms (the present ones).
func txnRows(r *Result) []namedSummary {
	var rows []namedSummary
	for _, h := range []namedSummary{{"commit", r.CommitLatencyUs}, {"lso lag", r.LSOLagUs}, {"e2e read_committed", r.E2EReadCommittedUs}} {
		if h.s != nil {
			rows = append(rows, h)
		}
	}
	return rows
}

type namedSummary struct {
	name string
	s    *Summary
}

// TxnHists are a transactional run's optional histograms by metric suffix (compare, gate,
// report): commit, lsolag, e2erc. get returns nil when the result has none.
var TxnHists = []struct {
	Metric, Field, Name string
	Get                 func(*Result) *Summary
}{
	{"commit", "commit_latency_us", "commit", func(r *Result) *Summary { return r.CommitLatencyUs }},
	{"lsolag", "lso_lag_us", "lso lag", func(r *Result) *Summary { return r.LSOLagUs }},
	{"e2erc", "e2e_read_committed_us", "e2e read_committed", func(r *Result) *Summary { return r.E2EReadCommittedUs }},
}

// txnHgrms are a transactional run's histogram names in a merge (files <name>.hgrm).
var txnHgrms = []string{"commit_latency", "lso_lag", "e2e_read_committed"}

// optSum summarizes the merged histogram name, nil when no worker had it.
func optSum(hists map[string]*Histogram, name string) *Summary {
	h := hists[name]
	if h == nil {
		return nil
	}
	s := Summarize(h)
	return &s
}

// mergeTransactions adds worker w's transactions to m (each worker checked its own producers'
// transactions; the pipeline's figures are the first worker's that has them).
func mergeTransactions(m, w *Transactions) *Transactions {
	if w == nil {
		return m
	}
	if m == nil {
		c := *w
		c.Errors = nil
		m = &c
		m.Committed, m.Aborted, m.Unknown, m.CommittedRecords, m.AbortedRecords = 0, 0, 0, 0, 0
		m.Verify = TxnVerify{Error: w.Verify.Error}
	}
	m.Committed += w.Committed
	m.Aborted += w.Aborted
	m.Unknown += w.Unknown
	m.CommittedRecords += w.CommittedRecords
	m.AbortedRecords += w.AbortedRecords
	for k, v := range w.Errors {
		if m.Errors == nil {
			m.Errors = map[string]int64{}
		}
		m.Errors[k] += v
	}
	v := &m.Verify
	v.Whole += w.Verify.Whole
	v.Visible += w.Verify.Visible
	v.Partial += w.Verify.Partial
	v.MissingRecords += w.Verify.MissingRecords
	v.AbortedSeen += w.Verify.AbortedSeen
	v.Duplicated += w.Verify.Duplicated
	v.Anomalies += w.Verify.Anomalies
	if v.Error == "" {
		v.Error = w.Verify.Error
	}
	if m.Pipeline == nil {
		m.Pipeline = w.Pipeline
	}
	return m
}
