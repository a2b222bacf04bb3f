package workloads

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// report assembles the result from the measurement, the settling and the verdict, writes
// the run's files (result.json, bench.txt, the .hgrm files, faults.json, the plots and
// report.html) and prints the summary. It returns the result also with an error: a file that
// could not be written, an incomplete read-back, or acks=all records lost although only
// clean elections were allowed (ErrDurability).
func (r *rig) report(m *measurement, st settled, v *verdict) (*results.Result, error) {
	s, p := r.spec, &r.plan
	res, hists := r.result(p.id, p.startedAt, r.tl, m.faults.ordered(), v.dc, v.byAcks)
	clientHgrms, err := r.externalResult(res, p.measureStart, st.obsUnseen)
	if err != nil {
		return res, err
	}
	clientHgrms = append(clientHgrms, r.txnResult(res, v.txn, hists.e2e)...)
	if res.E2EReadCommittedUs != nil {
		hists.e2e = results.NewHistogram() // read_committed consumers: e2e_read_committed.hgrm
	}
	if m.gp != nil {
		m.gpLoop.wait()
		res.Group = m.gp.result(r.cons, p.measureStart, p.measureEnd)
	}
	res.Cost = m.cost.cost(res.Produced.Records, r.tgt.Name() == "embedded", cpuProfileFile(m.profFiles))
	if st.consumersBehind {
		// e2e latency only has the records the consumers read: a stall at the end of the
		// run would otherwise pass unseen.
		res.Note("e2e_latency", fmt.Sprintf("consumers had not read up to the HW %v after the end of the run; records they had not received are missing from e2e_latency_us", consumerCatchUp))
		r.notef("e2e: consumers still behind the HW %v after the run; e2e_latency_us misses their unread records", consumerCatchUp)
	}
	if v.dc.Expired > 0 {
		res.Note("durability.expired", fmt.Sprintf("%d acknowledged records were deleted by retention (log.retention.bytes=%d, log.retention.ms=%d) before the read-back, which starts at the log start; they are not counted as lost", v.dc.Expired, s.Broker.LogRetentionBytes, s.Broker.LogRetentionMs))
	}
	if r.guard != nil {
		peak, minFree := r.guard.stats()
		res.Note("disk", fmt.Sprintf("data dir peak %s (%d bytes, sampled at most every %s, less often when walking it is costly, and after the load), least free space %s, floor isrbench.min.free.disk=%s", humanBytes(peak), peak, diskGuardInterval, humanBytes(minFree), s.Broker.MinFreeDisk))
	}
	fr := &FaultsReport{ProducerGroups: r.groupFigures()}
	v.replicas.apply(res, fr)
	if why := lossExpected(s); why != "" {
		res.Durability.LossExpected = why // derived from the settings
		fr.LossExpected = why
	}
	if m.pt != nil {
		m.pt.summarize(res, fr)
		res.Files.Partitions = fr.PartitionsCSV
	}
	res.Files.Faults = FaultsReportFile
	if err := writeFaultsReport(r.dir, fr); err != nil {
		return res, err
	}
	res.Files.Profiles = m.profFiles
	if m.profErr != nil {
		r.notef("profiles: %v", m.profErr)
	}
	if err := r.writeOutputs(res, r.tl, append(clientHgrms, hists.named()...), hists); err != nil {
		return res, err
	}
	if !r.opts.Quiet {
		if err := results.PrintSummary(r.opts.Stdout, res); err != nil {
			return res, err
		}
		fr.print(r.opts.Stdout)
		if r.guard != nil {
			peak, _ := r.guard.stats()
			fmt.Fprintf(r.opts.Stdout, "disk: data dir peak %s (log.retention.bytes=%d, log.segment.bytes=%d)\n", humanBytes(peak), s.Broker.LogRetentionBytes, s.Broker.LogSegmentBytes)
		}
		fmt.Fprintf(r.opts.Stdout, "results: %s (report.html)\n", r.dir)
	}
	if v.err != nil {
		return res, fmt.Errorf("durability check incomplete: %w", v.err)
	}
	if err := txnFailure(v.txn); err != nil {
		return res, err
	}
	if all := v.byAcks["all"]; all.Lost > 0 && lossExpected(s) == "" {
		return res, fmt.Errorf("%w: %d of %d acks=all records lost with clean elections only", ErrDurability, all.Lost, all.Acked)
	}
	return res, nil
}

// groupFigures sums the producers' acknowledgements and failures per producer group.
func (r *rig) groupFigures() []GroupFigures {
	var out []GroupFigures
	for gi, g := range r.spec.ProducerGroups() {
		gf := GroupFigures{Group: gi, Acks: g.Acks, Count: g.Count, Errors: map[string]int64{}}
		if r.opts.Worker.Active() {
			gf.Count = 0 // this worker's share
		}
		for _, p := range r.prods {
			if p.Group != gi {
				continue
			}
			if r.opts.Worker.Active() {
				gf.Count++
			}
			gf.Failed += p.NErrs.Load()
			gf.Acked += p.AckedCount()
			for k, v := range p.ErrCounts() {
				gf.Errors[k] += v
			}
		}
		out = append(out, gf)
	}
	return out
}

// formatCounts is "A=1 B=2" in name order.
func formatCounts(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// lossExpected says why this spec may lose acknowledged acks=all records ("" = it must not):
// unclean leader election, the truncate-to-HW ablation, or a crash (power loss) without an
// fsync per message.
func lossExpected(s *spec.Spec) string {
	var why []string
	if s.Broker.UncleanLeaderElectionEnable {
		why = append(why, "unclean.leader.election.enable=true")
	}
	if s.Broker.TruncateMode == "hw" {
		why = append(why, "isrbench.truncate.mode=hw (ablation)")
	}
	if s.Broker.FlushMessages > 1 {
		for _, f := range s.Faults {
			if f.Kind == "crash-broker" {
				why = append(why, "crash-broker with flush.messages > 1 (unsynced data dropped)")
				break
			}
		}
	}
	return strings.Join(why, "; ")
}

// result assembles result.json from the merged histograms and counters.
func (r *rig) result(id string, startedAt time.Time, tl *timeline, faults []results.Fault, dc results.DurabilityCounts, byAcks map[string]results.DurabilityCounts) (*results.Result, runHists) {
	s := r.spec
	ack, sd, e2e := results.NewHistogram(), results.NewHistogram(), results.NewHistogram()
	var recs, bytes int64
	errs := map[string]int64{}
	for _, p := range r.prods {
		ack.Merge(p.Ack.Snapshot())
		sd.Merge(p.SendDelay)
		recs += p.NAcked.Load()
		bytes += p.NBytes.Load()
		for k, v := range p.ErrCounts() {
			errs[k] += v
		}
	}
	for _, c := range r.cons {
		e2e.Merge(c.E2E)
	}
	hw := r.hwlag.Snapshot()
	secs := s.Duration.Seconds()
	res := &results.Result{
		Schema: results.SchemaVersion, ID: id, Name: s.Name, Target: r.tgt.Name(),
		StartedAt: startedAt.UTC(), DurationS: secs, Env: results.CurrentEnv(r.opts.Commit),
		Config: s.Config(),
		Produced: results.Produced{Records: recs, Bytes: bytes, RecordsPerSec: float64(recs) / secs,
			MBPerSec: float64(bytes) / secs / 1e6, Errors: errs},
		AckLatencyUs: results.Summarize(ack), HWLagUs: results.Summarize(hw),
		E2ELatencyUs: results.Summarize(e2e), SendDelayUs: results.Summarize(sd),
		ISR: results.ISR{Shrinks: tl.shrinks(), Expands: tl.expands(), UnderReplicatedS: tl.underReplicatedS},
	}
	if r.parts.Replicas != nil { // embedded: the brokers' and the controller's counters
		res.ISR.LeaderShrinks, res.ISR.ControllerShrinks = tl.shrinks()-tl.controllerShrinks(), tl.controllerShrinks()
	}
	res.Config["target"] = r.tgt.Name()
	res.Durability.DurabilityCounts = dc
	res.Durability.ByAcks = byAcks
	if _, ok := byAcks["0"]; ok {
		res.Note("durability", "acks=0: nothing is acknowledged, durability counts only duplicates")
	}
	if !r.tgt.HasHWLag() {
		res.Note("hw_lag", "hw_lag is measured inside the embedded core only; empty for "+r.tgt.Name())
	}
	res.Faults = faults
	r.damageFindings(res)
	return res, runHists{ack, hw, e2e, sd}
}

// runHists are the merged histograms result made, for writeOutputs.
type runHists struct{ ack, hw, e2e, sd *results.Histogram }

// named are the .hgrm files of h.
func (h runHists) named() []results.NamedHistogram {
	return []results.NamedHistogram{{Name: "ack_latency.hgrm", H: h.ack}, {Name: "hw_lag.hgrm", H: h.hw},
		{Name: "e2e_latency.hgrm", H: h.e2e}, {Name: "send_delay.hgrm", H: h.sd}}
}

// writeOutputs writes the run's files through results.WriteRun: the .hgrm files (the
// client-observed HW lag's first, see externalResult), bench.txt, the plots and result.json;
// then report.html.
func (r *rig) writeOutputs(res *results.Result, tl *timeline, hgrms []results.NamedHistogram, h runHists) error {
	res.Files.Timeline = tl.path
	err := results.WriteRun(r.dir, res, results.RunFiles{
		Hgrms: hgrms,
		Latency: []results.LatencySeries{{Name: "ack", H: h.ack}, {Name: "hw lag", H: h.hw},
			{Name: "e2e", H: h.e2e}, {Name: "send delay", H: h.sd}},
		Timeline:   tl.tl.Rows(),
		PlotFailed: func(err error) { r.notef("plot: %v", err) },
	})
	if err != nil {
		return err
	}
	return writeRunReport(r.dir)
}
