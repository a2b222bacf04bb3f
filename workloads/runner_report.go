package workloads

import (
	"fmt"

	"github.com/isrbench/isrbench/results"
)

// report assembles the result from the measurement, the settling and the verdict, writes
// the run's files (result.json, bench.txt, the .hgrm files, faults.json, the plots and
// report.html) and prints the summary. It returns the result also with an error: a file that
// could not be written, an incomplete read-back, or acks=all records lost although only
// clean elections were allowed (ErrDurability).
func (r *run) report(st settled, v *verdict) (*results.Result, error) {
	s, p := r.spec, &r.plan
	res := r.result(p.id, p.startedAt, r.tl, v.dc, v.byAcks)
	if err := r.externalResult(res, p.measureStart); err != nil {
		return res, err
	}
	if r.gp != nil {
		r.gpLoop.wait()
		res.Group = r.gp.result(r.cons, p.measureStart, p.measureEnd)
	}
	res.Cost = r.cost.cost(res.Produced.Records, r.tgt.Name() == "embedded", cpuProfileFile(r.profFiles))
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
		res.Note("disk", fmt.Sprintf("data dir peak %s (%d bytes, sampled every %s), least free space %s, floor isrbench.min.free.disk=%s", humanBytes(peak), peak, diskGuardInterval, humanBytes(minFree), s.Broker.MinFreeDisk))
	}
	fr := &FaultsReport{ProducerGroups: r.groupFigures()}
	v.replicas.apply(res, fr)
	if why := lossExpected(s); why != "" {
		res.Durability.LossExpected = why // derived from the settings
		fr.LossExpected = why
	}
	if r.pt != nil {
		r.pt.summarize(res, fr)
		res.Files.Partitions = fr.PartitionsCSV
	}
	res.Files.Faults = FaultsReportFile
	if err := writeFaultsReport(r.dir, fr); err != nil {
		return res, err
	}
	res.Files.Profiles = r.profFiles
	if r.profErr != nil {
		r.notef("profiles: %v", r.profErr)
	}
	if err := r.writeOutputs(res, r.tl); err != nil {
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
	if all := v.byAcks["all"]; all.Lost > 0 && lossExpected(s) == "" {
		return res, fmt.Errorf("%w: %d of %d acks=all records lost with clean elections only", ErrDurability, all.Lost, all.Acked)
	}
	return res, nil
}
