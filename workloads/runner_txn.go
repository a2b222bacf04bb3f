package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// The runner's parts for transactions (spec.Spec.Transactional): the LSO observer
// (load.LSOObserver) and the exactly-once pipeline (load.Pipeline) start with setup, settle
// waits for the LSO to pass every record and for the pipeline to commit every input,
// lsoEnd is min(end[p], the LSO of partition p) (end where the LSO cannot be listed).
func (r *rig) lsoEnd(ctx context.Context, end []int64) []int64 {
	topic := r.spec.Topic.Name
	out := append([]int64(nil), end...)
	lso, err := r.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return out
	}
	for p := range out {
		if l, ok := lso.Lookup(topic, int32(p)); ok && l.Err == nil && l.Offset < out[p] {
			out[p] = l.Offset
		}
	}
	return out
}

// verifyTxn reads the topics back read_committed (load.CheckTransactions, load.CheckPipeline),
// and txnResult puts the histograms and the verdict in the result. An ordinary run has none
// of it: txn stays nil.

// txnRig is the transactional part of a run (rig.txn), used by the runner's goroutine only.
type txnRig struct {
	lso     *load.LSOObserver
	lsoStop func()
	// The pipeline: its members, the loop running them, the output topic's end offsets
	// before the load (exclusive) and its run's spec (the benchmark topic's settings).
	pipes    []*load.Pipeline
	pipeLoop *loop
	outSpec  *spec.Spec
	outStart []int64
	// What settle found: the LSO observer's unseen records and errors, whether the pipeline
	// caught up, the benchmark topic's LSO when it reached the HW.
	lsoUnseen  int64
	lsoErrs    string
	pipeBehind bool
	lsoNotHW   string
}

// txnIDOf is the transactional.id of producer global of group g ("" when g is not
// transactional).
func txnIDOf(g spec.ProducerSpec, global int) string {
	if g.Txn.ID == "" {
		return ""
	}
	return spec.TransactionalID(g.Txn.ID, global)
}

// startTxn starts the LSO observer and the pipeline of a transactional run (setup, after the
// schedule is fixed); closeTxn (registered in loops) ends them on every path.
func (r *rig) startTxn(ctx context.Context) error {
	s := r.spec
	if !s.Transactional() {
		return nil
	}
	t := &txnRig{}
	r.txn = t
	o, err := load.NewLSOObserver(append(r.plan.conn[:len(r.plan.conn):len(r.plan.conn)], kgo.MetadataMinAge(target.FreshMetadata)), s.Topic.Name, r.plan.startOffs, r.win)
	if err != nil {
		return err
	}
	t.lso = o
	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(octx) }()
	t.lsoStop = func() { cancel(); <-done }
	r.loops.onClose(func() {
		if t.lsoStop != nil {
			t.lsoStop()
			t.lsoStop = nil
			o.Close()
		}
	})
	if !s.Pipeline.Enabled {
		return nil
	}
	t.outSpec = s.Clone()
	t.outSpec.Topic.Name = s.OutputTopicName()
	if _, err := target.EnsureTopic(ctx, r.adm, t.outSpec, r.topicConfigs(), 30*time.Second); err != nil {
		return fmt.Errorf("pipeline.output.topic: %w", err)
	}
	if t.outStart, err = target.ListOffsets(ctx, r.adm, t.outSpec.Topic.Name, s.Topic.Partitions, true); err != nil {
		return err
	}
	// The group starts at the HW before the load: its offsets are committed before any
	// member joins (a reset by timestamp could land past a transaction still open then).
	offs := kadm.Offsets{}
	for p, o := range r.plan.startOffs {
		offs.AddOffset(s.Topic.Name, int32(p), o, -1)
	}
	if err := r.adm.CommitAllOffsets(ctx, s.Pipeline.GroupID, offs); err != nil {
		return fmt.Errorf("pipeline.group.id %s: committing the start offsets: %w", s.Pipeline.GroupID, err)
	}
	r.loops.onClose(func() {
		for _, p := range t.pipes {
			p.Close()
		}
	})
	for n := 0; n < s.Pipeline.Count; n++ {
		p, err := load.NewPipeline(r.plan.conn, s.Topic.Name, s.Topic.Partitions, s.Pipeline, t.outSpec.Topic.Name, n, time.Duration(s.Producers.Txn.TimeoutMs)*time.Millisecond)
		if err != nil {
			return err
		}
		t.pipes = append(t.pipes, p)
	}
	pipes := t.pipes
	t.pipeLoop = r.loops.start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, p := range pipes {
			wg.Go(func() { p.Run(ctx) })
		}
		wg.Wait()
	})
	return nil
}

// settleTxn (settle, after the producers drained) waits up to 30 s for the benchmark topic's
// LSO to reach its HW (every transaction ended), lets the LSO observer see it pass every
// record, and waits for the pipeline to commit every input record.
func (r *rig) settleTxn(ctx context.Context) {
	t := r.txn
	if t == nil {
		return
	}
	s := r.spec
	t.lsoNotHW = poll.Until(ctx, 30*time.Second, 20*time.Millisecond, func() string {
		return r.lsoBehind(ctx, s.Topic.Name, s.Topic.Partitions)
	})
	if t.lsoNotHW != "" {
		r.notef("transactions: %s 30 s after the load", t.lsoNotHW)
	}
	stop := t.lsoStop
	t.lsoStop = nil
	t.lsoUnseen, t.lsoErrs = t.lso.Finish(ctx, stop, 5*time.Second)
	if t.pipeLoop == nil {
		return
	}
	end, err := target.ListOffsets(ctx, r.adm, s.Topic.Name, s.Topic.Partitions, true)
	if err == nil {
		t.pipeBehind = poll.Until(ctx, 30*time.Second, 20*time.Millisecond, func() string {
			if !load.PipelineCaughtUp(t.pipes, r.plan.startOffs, end) {
				return "behind"
			}
			return ""
		}) != ""
	}
	if t.pipeBehind || err != nil {
		r.notef("pipeline: had not committed every input record 30 s after the load (%v)", err)
	}
	t.pipeLoop.stop()
}

// lsoBehind describes the partitions whose LSO is below the HW ("" when none).
func (r *rig) lsoBehind(ctx context.Context, topic string, n int) string {
	hw, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	lso, err := r.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	for p := int32(0); p < int32(n); p++ {
		h, ok1 := hw.Lookup(topic, p)
		l, ok2 := lso.Lookup(topic, p)
		switch {
		case !ok1 || !ok2 || h.Err != nil || l.Err != nil:
			return fmt.Sprintf("partition %d: offsets not listed", p)
		case l.Offset < h.Offset:
			return fmt.Sprintf("partition %d: LSO %d below the HW %d (a transaction still open)", p, l.Offset, h.Offset)
		}
	}
	return ""
}

// verifyTxn reads the topics back read_committed (verify, after the durability check): the
// producers' transactions from readFrom to end (the LSO = HW after settle), and the pipeline's
// output.
func (r *rig) verifyTxn(ctx context.Context, readFrom, end []int64) *results.Transactions {
	t := r.txn
	if t == nil {
		return nil
	}
	s := r.spec
	out := &results.Transactions{LSOLagResolutionUs: float64(load.LSOPollInterval / time.Microsecond)}
	out.Committed, out.Aborted, out.Unknown, out.CommittedRecords, out.AbortedRecords, out.Errors = load.TxnCounts(r.prods)
	vctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if t.lsoNotHW != "" {
		// A transaction still open: read_committed reads stop at the LSO, and what the
		// committed transactions have above it counts as missing.
		end = r.lsoEnd(ctx, end)
	}
	out.Verify = load.CheckTransactions(vctx, r.plan.conn, s.Topic.Name, readFrom, end, r.prods)
	if out.Verify.Error != "" {
		r.notef("transactions: read_committed read-back: %s", out.Verify.Error)
	}
	if t.pipeLoop != nil {
		outEnd, err := target.ListOffsets(ctx, r.adm, t.outSpec.Topic.Name, s.Topic.Partitions, true)
		var pr results.PipelineRun
		if err != nil {
			pr = results.PipelineRun{OutputTopic: t.outSpec.Topic.Name, Error: err.Error()}
		} else {
			pr = load.CheckPipeline(vctx, r.plan.conn, s.Topic.Name, readFrom, end, t.outSpec.Topic.Name, t.outStart, outEnd, r.prods)
		}
		for _, p := range t.pipes {
			pr.Committed += p.Committed.Load()
			pr.Aborted += p.Aborted.Load()
		}
		out.Pipeline = &pr
		if pr.Error != "" {
			r.notef("pipeline: output read-back: %s", pr.Error)
		}
	}
	return out
}

// txnResult adds a transactional run's histograms (commit latency, LSO lag, and the
// consumers' e2e as e2e_read_committed_us when they read read_committed), its verdict and
// notes to res; it returns their .hgrm files.
func (r *rig) txnResult(res *results.Result, tx *results.Transactions, e2e *results.Histogram) []results.NamedHistogram {
	t := r.txn
	if t == nil {
		return nil
	}
	commit := results.NewHistogram()
	for _, p := range r.prods {
		if p.Commit != nil {
			commit.Merge(p.Commit.Snapshot())
		}
	}
	lag := t.lso.Lag.Snapshot()
	cs, ls := results.Summarize(commit), results.Summarize(lag)
	res.CommitLatencyUs, res.LSOLagUs, res.Transactions = &cs, &ls, tx
	files := []results.NamedHistogram{{Name: "commit_latency.hgrm", H: commit}, {Name: "lso_lag.hgrm", H: lag}}
	if r.spec.Consumers.IsolationLevel == spec.ReadCommitted && len(r.cons) > 0 {
		es := results.Summarize(e2e)
		res.E2EReadCommittedUs = &es
		res.E2ELatencyUs = results.Summarize(results.NewHistogram())
		files = append(files, results.NamedHistogram{Name: "e2e_read_committed.hgrm", H: e2e})
		res.Note("e2e_latency", "the consumers read read_committed: their latency is e2e_read_committed_us (intended send -> the record received below the LSO)")
	}
	note := fmt.Sprintf("lso_lag_us: the HW past a record -> the LSO past it, both seen by ListOffsets LATEST polled every %s; commit_latency_us: a committed transaction's first intended send -> EndTxn answered", load.LSOPollInterval)
	if t.lsoUnseen > 0 {
		note += fmt.Sprintf("; %d records the LSO was not seen passing are left out", t.lsoUnseen)
	}
	if t.lsoErrs != "" {
		note += "; " + t.lsoErrs
	}
	res.Note("transactions", note)
	return files
}

// txnFailure is the error of a transactional run whose read_committed checks found anomalies
// or could not finish (nil without).
func txnFailure(tx *results.Transactions) error {
	if tx == nil {
		return nil
	}
	var pipe results.PipelineRun
	if tx.Pipeline != nil {
		pipe = *tx.Pipeline
	}
	if n := tx.Verify.Anomalies + pipe.Anomalies(); n > 0 {
		return fmt.Errorf("%w: transactions: %d anomalies (read_committed: %d partial transactions, %d committed records missing, %d aborted records seen, %d duplicated; pipeline: %d inputs without output, %d duplicated, %d malformed)",
			ErrDurability, n, tx.Verify.Partial, tx.Verify.MissingRecords, tx.Verify.AbortedSeen, tx.Verify.Duplicated,
			pipe.Missing, pipe.Duplicated, pipe.Malformed)
	}
	if tx.Verify.Error != "" {
		return fmt.Errorf("transactions: read_committed check incomplete: %s", tx.Verify.Error)
	}
	if pipe.Error != "" {
		return fmt.Errorf("pipeline: output check incomplete: %s", pipe.Error)
	}
	return nil
}
