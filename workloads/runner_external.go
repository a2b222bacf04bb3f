package workloads

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// The runner's parts for external clusters and multi-worker runs: the settings a kafka://
// target is given (target.ConfigSession), the client-observed HW lag (load.HWObserver) and the
// worker's share of the load (load.Worker). runner.go calls these at fixed points of a run.

// isKafkaTarget reports whether the run drives a kafka:// cluster.
func (r *rig) isKafkaTarget() bool { return strings.HasPrefix(r.opts.Target, "kafka://") }

// topicConfigs are the configs the benchmark topic is created with: on a kafka:// target
// every topic setting the spec gives (TopicConfigs), on the embedded one min.insync.replicas
// (its brokers were started with the rest).
func (r *rig) topicConfigs() map[string]*string {
	if r.isKafkaTarget() {
		return target.TopicConfigs(r.spec)
	}
	minISR := fmt.Sprint(r.spec.Topic.MinInsyncReplicas)
	return map[string]*string{"min.insync.replicas": &minISR}
}

// prepareTarget creates the topic (waiting for full ISRs) and, on a kafka:// target, first
// checks the spec's settings against the cluster (Check: nothing runs when one cannot be
// applied) and then applies them (Apply). restoreTarget, deferred before it, undoes them.
func (r *rig) prepareTarget(ctx context.Context, adm *kadm.Client) error {
	if !r.isKafkaTarget() {
		_, err := target.EnsureTopic(ctx, adm, r.spec, r.topicConfigs(), 30*time.Second)
		return err
	}
	cs := r.opts.session
	if cs == nil {
		cs = target.NewConfigSession(adm, r.opts.Assume, r.notef)
		r.ownSession = cs
	}
	if !r.opts.Worker.First() {
		cs.CheckOnly(r.opts.Worker.StartAt.Add(30 * time.Second))
	}
	notes, err := cs.Check(ctx, r.spec)
	if err != nil {
		return err
	}
	r.targetNotes = notes
	created, err := target.EnsureTopic(ctx, adm, r.spec, r.topicConfigs(), 30*time.Second)
	if err != nil {
		return err
	}
	r.targetSettings, err = cs.Apply(ctx, r.spec, created)
	return err
}

// restoreTarget restores what the run's own ConfigSession changed (a sweep restores its
// session after its last point); a failure is kept for Run's error.
func (r *rig) restoreTarget(ctx context.Context) {
	if r.ownSession == nil {
		return
	}
	if err := r.ownSession.Restore(ctx); err != nil {
		r.restoreErr = err
		r.notef("target: %v", err)
	}
}

func (r *rig) notef(format string, args ...any) {
	if !r.opts.Quiet {
		fmt.Fprintf(r.opts.Stderr, format+"\n", args...)
	}
}

// loadStart is when the producers start: 200 ms from now, or a worker's --start-at, which
// the setup must not have passed.
func (r *rig) loadStart() (time.Time, error) {
	w := r.opts.Worker
	if !w.Active() {
		return time.Now().Add(200 * time.Millisecond), nil
	}
	if left := time.Until(w.StartAt); left < 100*time.Millisecond {
		return time.Time{}, fmt.Errorf("worker %s: --start-at %s is %s away after the setup, too late to start every worker together; give a later time",
			w, w.StartAt.UTC().Format(time.RFC3339Nano), left.Round(time.Millisecond))
	}
	return w.StartAt, nil
}

// idBase is the first producer id of this run (see Worker.idBase).
func (r *rig) idBase() uint32 { return r.opts.Worker.IDBase(r.spec.Name, rand.Uint32()) }

// producerTotal is the number of producers the spec has over all workers.
func (r *rig) producerTotal() int {
	n := 0
	for _, g := range r.spec.ProducerGroups() {
		n += g.Count
	}
	return n
}

// startObserver starts the client HW observer when hw.lag.client asks for it (see
// Spec.HWLagClient) and some producer waits for acknowledgements; stopObserver (deferred) ends
// it on any path, finishObserver after the drain.
func (r *rig) startObserver(ctx context.Context, conn []kgo.Opt, startOffs []int64) error {
	acked := false
	for _, g := range r.spec.ProducerGroups() {
		acked = acked || (g.Count > 0 && g.Acks != "0")
	}
	if !acked || !r.spec.ObservesHWLag(r.tgt.Name()) {
		return nil
	}
	o, err := load.NewHWObserver(append(conn[:len(conn):len(conn)], kgo.MetadataMinAge(target.FreshMetadata)), r.spec.Topic.Name, startOffs, r.win)
	if err != nil {
		return err
	}
	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(octx) }()
	r.obs = o
	r.obsStop = func() { cancel(); <-done }
	return nil
}

func (r *rig) stopObserver() {
	if r.obsStop != nil {
		r.obsStop()
		r.obsStop = nil
		r.obs.Close()
	}
}

// finishObserver waits (up to 5 s) until the HW is seen past every acknowledged record; it
// returns how many acknowledged records it did not see committed.
func (r *rig) finishObserver(ctx context.Context) (unseen int) {
	if r.obs == nil || r.obsStop == nil {
		return 0
	}
	stop := r.obsStop
	r.obsStop = nil
	return r.obs.Finish(ctx, stop, 5*time.Second)
}

// timelineHWInterval is timeline.csv's hw_lag_p99_us source: the core's HW lag on the
// embedded target, the client-observed one (from the acknowledgement) elsewhere.
func (r *rig) timelineHWInterval() *results.Histogram {
	if r.tgt.HasHWLag() || r.obs == nil {
		return r.hwlag.Interval()
	}
	return r.obs.FromAck.Interval()
}

// externalResult adds to res what this file's parts measured: the client HW lag (unseen: the
// acknowledged records the observer did not see committed), the target's settings and notes,
// the worker's part; it returns the client HW lag's .hgrm files, which writeOutputs writes
// first. Called before the outputs are written.
func (r *rig) externalResult(res *results.Result, measureStart time.Time, unseen int) (clientHgrms []results.NamedHistogram, err error) {
	if r.obs != nil {
		ack, send := r.obs.FromAck.Snapshot(), r.obs.FromSend.Snapshot()
		sa, ss := results.Summarize(ack), results.Summarize(send)
		res.HWLagClientUs, res.HWLagClientSendUs = &sa, &ss
		res.HWObserver = r.obs.Summary(unseen)
		clientHgrms = []results.NamedHistogram{{Name: "hw_lag_client.hgrm", H: ack}, {Name: "hw_lag_client_send.hgrm", H: send}}
		note := fmt.Sprintf("client-observed: produce acknowledgement (and intended send) -> first fetch response showing the HW past the record; resolution %s µs (p99 window between responses, fetch.max.wait.ms %d)",
			results.FormatValue(res.HWObserver.ResolutionUs), res.HWObserver.FetchMaxWaitMs)
		if unseen > 0 {
			note += fmt.Sprintf("; %d acknowledged records whose HW advance was not seen are left out", unseen)
		}
		res.Note("hw_lag_client", note)
	}
	if r.isKafkaTarget() {
		res.TargetConfig = r.targetSettings
		res.Note("hw_lag", "hw_lag_us (leader append -> HW) is measured inside the embedded core only; hw_lag_client_us is this cluster's, observed by a client")
		res.Note("partitions.leo", "partitions.csv: Kafka clients see each partition's leader, epoch, ISR (Metadata), HW and log start (ListOffsets), not a replica's LEO (n/a)")
		if len(r.targetNotes) > 0 {
			res.Note("target_config", strings.Join(r.targetNotes, "; "))
		}
	}
	res.Worker = r.workerInfo(measureStart)
	if w := r.opts.Worker; w.Active() && !w.First() && len(r.spec.Faults) > 0 {
		res.Note("faults", fmt.Sprintf("worker %s runs no faults: worker 1 runs the schedule", w))
	}
	return clientHgrms, nil
}
