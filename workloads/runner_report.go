package workloads

import (
	"fmt"
	"sort"
	"strings"

	"github.com/isrbench/isrbench/internal/sched"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// report assembles the result from the phases' values, writes the run's files (result.json,
// bench.txt, the .hgrm files, faults.json, the plots and report.html) and prints the summary.
// It returns the result also with an error: a file that could not be written, an incomplete
// read-back, or acks=all records lost although only clean elections were allowed
// (ErrDurability).
func report(in *runInput, p *prepared, m *measured, st *settled, v *verified) (*results.Result, error) {
	s, sc := in.spec, p.sched
	res, hists := result(in, p, m.tl, m.faults.ordered(), v.dc, v.byAcks)
	p.probe.apply(res)
	clientHgrms := externalResult(res, in, p, st.obsUnseen)
	clientHgrms = append(clientHgrms, txnResult(res, in, p, st.txn, v.txn, hists.e2e)...)
	if res.E2EReadCommittedUs != nil {
		hists.e2e = results.NewHistogram() // read_committed consumers: e2e_read_committed.hgrm
	}
	if m.gp != nil {
		m.gpLoop.wait()
		res.Group = m.gp.result(p.cl.cons, sc.measureStart, sc.measureEnd)
	}
	res.Cost = m.cost.cost(res.Produced.Records, p.tgt.Name() == "embedded", cpuProfileFile(m.profFiles))
	if st.consumersBehind {
		// e2e latency only has the records the consumers read: a stall at the end of the
		// run would otherwise pass unseen.
		res.Note("e2e_latency", fmt.Sprintf("consumers had not read up to the HW %v after the end of the run; records they had not received are missing from e2e_latency_us", consumerCatchUp))
		in.notef("e2e: consumers still behind the HW %v after the run; e2e_latency_us misses their unread records", consumerCatchUp)
	}
	if v.dc.Expired > 0 {
		res.Note("durability.expired", fmt.Sprintf("%d acknowledged records were deleted by retention (log.retention.bytes=%d, log.retention.ms=%d) before the read-back, which starts at the log start; they are not counted as lost", v.dc.Expired, s.Settings.Int("log.retention.bytes"), s.Settings.Int("log.retention.ms")))
	}
	if p.guard != nil {
		peak, minFree := p.guard.stats()
		res.Note("disk", fmt.Sprintf("data dir peak %s (%d bytes, sampled at most every %s, less often when walking it is costly, and after the load), least free space %s, floor isrbench.min.free.disk=%s", humanBytes(peak), peak, diskGuardInterval, humanBytes(minFree), s.MinFreeDisk))
	}
	fr := &FaultsReport{ProducerGroups: groupFigures(in, p.cl)}
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
	if err := writeFaultsReport(in.dir, fr); err != nil {
		return res, err
	}
	res.Files.Profiles = m.profFiles
	if m.profErr != nil {
		in.notef("profiles: %v", m.profErr)
	}
	if err := writeOutputs(in, res, m.tl, append(clientHgrms, hists.named()...), hists); err != nil {
		return res, err
	}
	if !in.opts.Quiet {
		out := in.opts.Stdout
		if err := results.PrintSummary(out, res); err != nil {
			return res, err
		}
		fr.print(out)
		if p.guard != nil {
			peak, _ := p.guard.stats()
			fmt.Fprintf(out, "disk: data dir peak %s (log.retention.bytes=%d, log.segment.bytes=%d)\n", humanBytes(peak), s.Settings.Int("log.retention.bytes"), s.Settings.Int("log.segment.bytes"))
		}
		fmt.Fprintf(out, "results: %s (report.html)\n", in.dir)
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
func groupFigures(in *runInput, cl *clients) []GroupFigures {
	var out []GroupFigures
	w := in.opts.Worker
	for gi, g := range in.spec.ProducerGroups() {
		gf := GroupFigures{Group: gi, Acks: g.Acks, Count: g.Count, Errors: map[string]int64{}}
		if w.Active() {
			gf.Count = 0 // this worker's share
		}
		for _, p := range cl.prods {
			if p.Group != gi {
				continue
			}
			if w.Active() {
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
	if s.Settings.Bool("unclean.leader.election.enable") {
		why = append(why, "unclean.leader.election.enable=true")
	}
	if s.Settings.Text("isrbench.truncate.mode") == "hw" {
		why = append(why, "isrbench.truncate.mode=hw (ablation)")
	}
	if s.Settings.Int("log.flush.interval.messages") > 1 {
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
func result(in *runInput, p *prepared, tl *timeline, faults []results.Fault, dc results.DurabilityCounts, byAcks map[string]results.DurabilityCounts) (*results.Result, runHists) {
	s, tgt := in.spec, p.tgt
	ack, sd, e2e := results.NewHistogram(), results.NewHistogram(), results.NewHistogram()
	var recs, bytes int64
	errs := map[string]int64{}
	for _, pr := range p.cl.prods {
		ack.Merge(pr.Ack.Snapshot())
		sd.Merge(pr.SendDelay)
		recs += pr.NAcked.Load()
		bytes += pr.NBytes.Load()
		for k, v := range pr.ErrCounts() {
			errs[k] += v
		}
	}
	for _, c := range p.cl.cons {
		e2e.Merge(c.E2E)
	}
	hw := p.sink.hwlag.Snapshot()
	secs := s.Duration.Seconds()
	res := &results.Result{
		Schema: results.SchemaVersion, ID: in.id, Name: s.Name, Target: tgt.Name(),
		StartedAt: in.startedAt.UTC(), DurationS: secs, Env: results.CurrentEnv(in.opts.Commit),
		Config: s.Config(),
		Produced: results.Produced{Records: recs, Bytes: bytes, RecordsPerSec: float64(recs) / secs,
			MBPerSec: float64(bytes) / secs / 1e6, Errors: errs},
		AckLatencyUs: results.Summarize(ack), HWLagUs: results.Summarize(hw),
		E2ELatencyUs: results.Summarize(e2e), SendDelayUs: results.Summarize(sd),
		ISR: results.ISR{Shrinks: tl.shrinks(), Expands: tl.expands(), UnderReplicatedS: tl.underReplicatedS},
	}
	if tgt.parts.Replicas != nil { // embedded: the brokers' and the controller's counters
		res.ISR.LeaderShrinks, res.ISR.ControllerShrinks = tl.shrinks()-tl.controllerShrinks(), tl.controllerShrinks()
	}
	res.Config["target"] = tgt.Name()
	res.Env.Sched = sched.Describe()
	if in.schedRefused != "" {
		res.Note("sched", in.schedRefused)
	}
	res.Durability.DurabilityCounts = dc
	res.Durability.ByAcks = byAcks
	if _, ok := byAcks["0"]; ok {
		res.Note("durability", "acks=0: nothing is acknowledged, durability counts only duplicates")
	}
	if !tgt.HasHWLag() {
		res.Note("hw_lag", "hw_lag is measured inside the embedded core only; empty for "+tgt.Name())
	}
	res.Faults = faults
	p.sink.damageFindings(res)
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
func writeOutputs(in *runInput, res *results.Result, tl *timeline, hgrms []results.NamedHistogram, h runHists) error {
	res.Files.Timeline = tl.path
	err := results.WriteRun(in.dir, res, results.RunFiles{
		Hgrms: hgrms,
		Latency: []results.LatencySeries{{Name: "ack", H: h.ack}, {Name: "hw lag", H: h.hw},
			{Name: "e2e", H: h.e2e}, {Name: "send delay", H: h.sd}},
		Timeline:   tl.tl.Rows(),
		PlotFailed: func(err error) { in.notef("plot: %v", err) },
	})
	if err != nil {
		return err
	}
	return writeRunReport(in.dir)
}
