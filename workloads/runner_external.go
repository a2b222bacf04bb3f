package workloads

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// The runner's parts for external clusters and multi-worker runs: the settings a kafka://
// target is given (target.ConfigSession), the client-observed HW lag (load.HWObserver) and the
// worker's share of the load (load.Worker). The phases call these at fixed points of a run.

// topicConfigs are the configs the benchmark topic is created with: on a kafka:// target
// every topic setting the spec gives (TopicConfigs), on the embedded one min.insync.replicas
// (its brokers were started with the rest).
func topicConfigs(in *runInput) map[string]*string {
	if in.kafkaTarget() {
		return target.TopicConfigs(in.spec)
	}
	minISR := fmt.Sprint(in.spec.Topic.MinInsyncReplicas)
	return map[string]*string{"min.insync.replicas": &minISR}
}

// prepareTarget creates the topic (waiting for full ISRs) and, on a kafka:// target, first
// checks the spec's settings against the cluster (Check: nothing runs when one cannot be
// applied) and then applies them (Apply). A session of the run's own (no Options.session) is
// restored when ls closes, also after a partial prepareTarget; a failure to restore is
// close's error.
func prepareTarget(ctx context.Context, in *runInput, adm *kadm.Client, ls *loops) (targetConfig, error) {
	var tc targetConfig
	if !in.kafkaTarget() {
		_, err := target.EnsureTopic(ctx, adm, in.spec, topicConfigs(in), 30*time.Second)
		return tc, err
	}
	cs := in.opts.session
	if cs == nil {
		cs = target.NewConfigSession(adm, in.opts.Assume, in.notef)
		ls.onCloseErr(func() error {
			err := cs.Restore(ctx)
			if err != nil {
				in.notef("target: %v", err)
			}
			return err
		})
	}
	if w := in.opts.Worker; !w.First() {
		cs.CheckOnly(w.StartAt.Add(30 * time.Second))
	}
	notes, err := cs.Check(ctx, in.spec)
	if err != nil {
		return tc, err
	}
	tc.notes = notes
	created, err := target.EnsureTopic(ctx, adm, in.spec, topicConfigs(in), 30*time.Second)
	if err != nil {
		return tc, err
	}
	tc.settings, err = cs.Apply(ctx, in.spec, created)
	return tc, err
}

// loadStart is when the producers start: 200 ms from now, or a worker's --start-at, which
// the setup must not have passed.
func loadStart(w load.Worker) (time.Time, error) {
	if !w.Active() {
		return time.Now().Add(200 * time.Millisecond), nil
	}
	if left := time.Until(w.StartAt); left < 100*time.Millisecond {
		return time.Time{}, fmt.Errorf("worker %s: --start-at %s is %s away after the setup, too late to start every worker together; give a later time",
			w, w.StartAt.UTC().Format(time.RFC3339Nano), left.Round(time.Millisecond))
	}
	return w.StartAt, nil
}

// producerTotal is the number of producers the spec has over all workers.
func producerTotal(s *spec.Spec) int {
	n := 0
	for _, g := range s.ProducerGroups() {
		n += g.Count
	}
	return n
}

// startObserver starts the client HW observer when hw.lag.client asks for it (see
// Spec.HWLagClient) and some producer waits for acknowledgements (nil otherwise).
func startObserver(ctx context.Context, in *runInput, tgtName string, conn []kgo.Opt, startOffs []int64, win load.Window, ls *loops) (*hwObs, error) {
	acked := false
	for _, g := range in.spec.ProducerGroups() {
		acked = acked || (g.Count > 0 && g.Acks != "0")
	}
	if !acked || !in.spec.ObservesHWLag(tgtName) {
		return nil, nil
	}
	o, err := load.NewHWObserver(append(conn[:len(conn):len(conn)], kgo.MetadataMinAge(target.FreshMetadata)), in.spec.Topic.Name, startOffs, win)
	if err != nil {
		return nil, err
	}
	h := &hwObs{HWObserver: o}
	h.loop = ls.start(ctx, o.Run)
	ls.onClose(h.close)
	return h, nil
}

// finish waits (up to 5 s) until the HW is seen past every acknowledged record; it returns
// how many acknowledged records it did not see committed.
func (h *hwObs) finish(ctx context.Context) (unseen int) {
	if h == nil || h.ended {
		return 0
	}
	h.ended = true
	return h.Finish(ctx, h.loop.stop, 5*time.Second)
}

func (h *hwObs) close() {
	if h.ended {
		return
	}
	h.ended = true
	h.loop.stop()
	h.Close()
}

// hwInterval is timeline.csv's hw_lag_p99_us source: the core's HW lag on the embedded
// target, the client-observed one (from the acknowledgement) elsewhere.
func (p *prepared) hwInterval() *results.Histogram {
	if p.tgt.HasHWLag() || p.obs == nil {
		return p.sink.hwlag.Interval()
	}
	return p.obs.FromAck.Interval()
}

// externalResult adds to res what this file's parts measured: the client HW lag (unseen: the
// acknowledged records the observer did not see committed), the target's settings and notes,
// the worker's part; it returns the client HW lag's .hgrm files, which writeOutputs writes
// first. Called before the outputs are written.
func externalResult(res *results.Result, in *runInput, p *prepared, unseen int) (clientHgrms []results.NamedHistogram) {
	if o := p.obs; o != nil {
		ack, send := o.FromAck.Snapshot(), o.FromSend.Snapshot()
		sa, ss := results.Summarize(ack), results.Summarize(send)
		res.HWLagClientUs, res.HWLagClientSendUs = &sa, &ss
		res.HWObserver = o.Summary(unseen)
		clientHgrms = []results.NamedHistogram{{Name: "hw_lag_client.hgrm", H: ack}, {Name: "hw_lag_client_send.hgrm", H: send}}
		note := fmt.Sprintf("client-observed: produce acknowledgement (and intended send) -> first fetch response showing the HW past the record; resolution %s µs (p99 window between responses, fetch.max.wait.ms %d)",
			results.FormatValue(res.HWObserver.ResolutionUs), res.HWObserver.FetchMaxWaitMs)
		if unseen > 0 {
			note += fmt.Sprintf("; %d acknowledged records whose HW advance was not seen are left out", unseen)
		}
		res.Note("hw_lag_client", note)
	}
	if in.kafkaTarget() {
		res.TargetConfig = p.tcfg.settings
		res.Note("hw_lag", "hw_lag_us (leader append -> HW) is measured inside the embedded core only; hw_lag_client_us is this cluster's, observed by a client")
		res.Note("partitions.leo", "partitions.csv: Kafka clients see each partition's leader, epoch, ISR (Metadata), HW and log start (ListOffsets), not a replica's LEO (n/a)")
		if len(p.tcfg.notes) > 0 {
			res.Note("target_config", strings.Join(p.tcfg.notes, "; "))
		}
	}
	res.Worker = workerInfo(in.opts.Worker, p.cl.cons, p.sched.measureStart)
	if w := in.opts.Worker; w.Active() && !w.First() && len(in.spec.Faults) > 0 {
		res.Note("faults", fmt.Sprintf("worker %s runs no faults: worker 1 runs the schedule", w))
	}
	return clientHgrms
}
