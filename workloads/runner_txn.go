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
// (load.LSOObserver) and the exactly-once pipeline (load.Pipeline) start with setup
// (txnParts), settle waits for the LSO to pass every record and for the pipeline to commit
// every input (txnSettled), verify reads the topics back read_committed
// (load.CheckTransactions, load.CheckPipeline), and txnResult puts the histograms and the
// verdict in the result. An ordinary run has none of it: its txn values stay nil.

// txnIDOf is the transactional.id of producer global of group g ("" when g is not
// transactional).
func txnIDOf(g spec.ProducerSpec, global int) string {
	if g.Txn.ID == "" {
		return ""
	}
	return spec.TransactionalID(g.Txn.ID, global)
}

// startTxn starts the LSO observer and the pipeline of a transactional run (setup, after the
// schedule is fixed; nil for an ordinary run); ls ends them on every path.
func startTxn(ctx context.Context, in *runInput, t *openTarget, startOffs []int64, win load.Window, ls *loops) (*txnParts, error) {
	s := in.spec
	if !s.Transactional() {
		return nil, nil
	}
	tp := &txnParts{}
	o, err := load.NewLSOObserver(append(t.conn[:len(t.conn):len(t.conn)], kgo.MetadataMinAge(target.FreshMetadata)), s.Topic.Name, startOffs, win)
	if err != nil {
		return nil, err
	}
	tp.lso = o
	tp.lsoLoop = ls.start(ctx, o.Run)
	ls.onClose(func() {
		if !tp.lsoEnded {
			tp.lsoEnded = true
			tp.lsoLoop.stop()
			o.Close()
		}
	})
	if !s.Pipeline.Enabled {
		return tp, nil
	}
	outSpec := s.Clone()
	outSpec.Topic.Name = s.OutputTopicName()
	tp.outTopic = outSpec.Topic.Name
	if _, err := target.EnsureTopic(ctx, t.adm, outSpec, topicConfigs(in), 30*time.Second); err != nil {
		return nil, fmt.Errorf("pipeline.output.topic: %w", err)
	}
	if tp.outStart, err = target.ListOffsets(ctx, t.adm, tp.outTopic, s.Topic.Partitions, true); err != nil {
		return nil, err
	}
	// The group starts at the HW before the load: its offsets are committed before any
	// member joins (a reset by timestamp could land past a transaction still open then).
	offs := kadm.Offsets{}
	for p, o := range startOffs {
		offs.AddOffset(s.Topic.Name, int32(p), o, -1)
	}
	if err := t.adm.CommitAllOffsets(ctx, s.Pipeline.GroupID, offs); err != nil {
		return nil, fmt.Errorf("pipeline.group.id %s: committing the start offsets: %w", s.Pipeline.GroupID, err)
	}
	ls.onClose(func() {
		for _, p := range tp.pipes {
			p.Close()
		}
	})
	for n := 0; n < s.Pipeline.Count; n++ {
		p, err := load.NewPipeline(t.conn, s.Topic.Name, s.Topic.Partitions, s.Pipeline, tp.outTopic, n, time.Duration(s.Producers.Txn.TimeoutMs)*time.Millisecond)
		if err != nil {
			return nil, err
		}
		tp.pipes = append(tp.pipes, p)
	}
	pipes := tp.pipes
	tp.pipeLoop = ls.start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, p := range pipes {
			wg.Go(func() { p.Run(ctx) })
		}
		wg.Wait()
	})
	return tp, nil
}

// settleTxn (settle, after the producers drained) waits up to 30 s for the benchmark topic's
// LSO to reach its HW (every transaction ended), lets the LSO observer see it pass every
// record, and waits for the pipeline to commit every input record, as long as it commits
// (nil for an ordinary run).
func settleTxn(ctx context.Context, in *runInput, adm *kadm.Client, startOffs []int64, tp *txnParts) *txnSettled {
	if tp == nil {
		return nil
	}
	s := in.spec
	ts := &txnSettled{}
	ts.lsoNotHW = poll.Until(ctx, 30*time.Second, 20*time.Millisecond, func() string {
		return lsoBehind(ctx, adm, s.Topic.Name, s.Topic.Partitions)
	})
	if ts.lsoNotHW != "" {
		in.notef("transactions: %s 30 s after the load", ts.lsoNotHW)
	}
	if !tp.lsoEnded {
		tp.lsoEnded = true
		ts.lsoUnseen, ts.lsoErrs = tp.lso.Finish(ctx, tp.lsoLoop.stop, 5*time.Second)
	}
	if tp.pipeLoop == nil {
		return ts
	}
	end, err := target.ListOffsets(ctx, adm, s.Topic.Name, s.Topic.Partitions, true)
	if err == nil {
		// Waited for while it commits: on a loaded host each of its transactions (a poll, the
		// produces, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) may take seconds. It is behind
		// once 30 s pass without a transaction committed, or 5 minutes in all.
		ts.pipeBehind = poll.WhileProgress(ctx, 30*time.Second, 5*time.Minute, 20*time.Millisecond, func() int64 {
			return load.PipelineCommitted(tp.pipes)
		}, func() string {
			if !load.PipelineCaughtUp(tp.pipes, startOffs, end) {
				return "behind"
			}
			return ""
		}) != ""
	}
	if ts.pipeBehind || err != nil {
		in.notef("pipeline: had not committed every input record after the load: none committed for 30 s, or 5 minutes passed (%v)", err)
	}
	tp.pipeLoop.stop()
	return ts
}

// lsoEnd is min(end[p], the LSO of partition p) (end where the LSO cannot be listed).
func lsoEnd(ctx context.Context, adm *kadm.Client, topic string, end []int64) []int64 {
	out := append([]int64(nil), end...)
	lso, err := adm.ListCommittedOffsets(ctx, topic)
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

// lsoBehind describes the partitions whose LSO is below the HW ("" when none).
func lsoBehind(ctx context.Context, adm *kadm.Client, topic string, n int) string {
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	lso, err := adm.ListCommittedOffsets(ctx, topic)
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
// producers' transactions from readFrom to the end offsets settle listed (the LSO = HW after
// settle), and the pipeline's output (nil for an ordinary run).
func verifyTxn(ctx context.Context, in *runInput, p *prepared, st *settled, readFrom []int64) *results.Transactions {
	tp, ts := p.txn, st.txn
	if tp == nil {
		return nil
	}
	s, t, end := in.spec, p.tgt, st.endOffs
	out := &results.Transactions{LSOLagResolutionUs: float64(load.LSOPollInterval / time.Microsecond)}
	out.Committed, out.Aborted, out.Unknown, out.CommittedRecords, out.AbortedRecords, out.Errors = load.TxnCounts(p.cl.prods)
	vctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if ts.lsoNotHW != "" {
		// A transaction still open: read_committed reads stop at the LSO, and what the
		// committed transactions have above it counts as missing.
		end = lsoEnd(ctx, t.adm, s.Topic.Name, end)
	}
	out.Verify = load.CheckTransactions(vctx, t.conn, s.Topic.Name, readFrom, end, p.cl.prods)
	if out.Verify.Error != "" {
		in.notef("transactions: read_committed read-back: %s", out.Verify.Error)
	}
	if tp.pipeLoop != nil {
		outEnd, err := target.ListOffsets(ctx, t.adm, tp.outTopic, s.Topic.Partitions, true)
		var pr results.PipelineRun
		if err != nil {
			pr = results.PipelineRun{OutputTopic: tp.outTopic, Error: err.Error()}
		} else {
			pr = load.CheckPipeline(vctx, t.conn, s.Topic.Name, readFrom, end, tp.outTopic, tp.outStart, outEnd, p.cl.prods)
		}
		for _, pl := range tp.pipes {
			pr.Committed += pl.Committed.Load()
			pr.Aborted += pl.Aborted.Load()
		}
		out.Pipeline = &pr
		if pr.Error != "" {
			in.notef("pipeline: output read-back: %s", pr.Error)
		}
	}
	return out
}

// txnResult adds a transactional run's histograms (commit latency, LSO lag, and the
// consumers' e2e as e2e_read_committed_us when they read read_committed), its verdict and
// notes to res; it returns their .hgrm files.
func txnResult(res *results.Result, in *runInput, p *prepared, ts *txnSettled, tx *results.Transactions, e2e *results.Histogram) []results.NamedHistogram {
	if p.txn == nil {
		return nil
	}
	commit := results.NewHistogram()
	for _, pr := range p.cl.prods {
		if pr.Commit != nil {
			commit.Merge(pr.Commit.Snapshot())
		}
	}
	lag := p.txn.lso.Lag.Snapshot()
	cs, ls := results.Summarize(commit), results.Summarize(lag)
	res.CommitLatencyUs, res.LSOLagUs, res.Transactions = &cs, &ls, tx
	files := []results.NamedHistogram{{Name: "commit_latency.hgrm", H: commit}, {Name: "lso_lag.hgrm", H: lag}}
	if in.spec.Consumers.IsolationLevel == spec.ReadCommitted && len(p.cl.cons) > 0 {
		es := results.Summarize(e2e)
		res.E2EReadCommittedUs = &es
		res.E2ELatencyUs = results.Summarize(results.NewHistogram())
		files = append(files, results.NamedHistogram{Name: "e2e_read_committed.hgrm", H: e2e})
		res.Note("e2e_latency", "the consumers read read_committed: their latency is e2e_read_committed_us (intended send -> the record received below the LSO)")
	}
	note := fmt.Sprintf("lso_lag_us: the HW past a record -> the LSO past it, both seen by ListOffsets LATEST polled every %s; commit_latency_us: a committed transaction's first intended send -> EndTxn answered", load.LSOPollInterval)
	if ts.lsoUnseen > 0 {
		note += fmt.Sprintf("; %d records the LSO was not seen passing are left out", ts.lsoUnseen)
	}
	if ts.lsoErrs != "" {
		note += "; " + ts.lsoErrs
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
