package target

import (
	"context"
	"errors"
	"fmt"
	"github.com/isrbench/isrbench/core/broker"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/workloads/spec"
)

// Target is the cluster a run drives: the embedded core or any Kafka-protocol cluster.
// The runner calls it from one goroutine, except Sample, which the timeline calls from its own.
type Target interface {
	// Name is "embedded" or "kafka://host:port,...".
	Name() string
	// Seeds are the bootstrap addresses for kgo.SeedBrokers.
	Seeds() []string
	// Sample reads the replication state of the topic for the timeline.
	Sample(ctx context.Context, topic string) (Sample, error)
	// ApplyFault applies f (resolved against the topic) and returns a function that heals it.
	ApplyFault(ctx context.Context, topic string, f spec.Fault) (target string, heal func() error, err error)
	// HasHWLag is true when the target reports leader append -> HW lag (the embedded core).
	HasHWLag() bool
	Close() error
}

// Sample is the replication state of the benchmark topic at one moment.
type Sample struct {
	ISRMin, ISRMax  int   // over the topic's partitions
	UnderReplicated int   // partitions whose ISR is smaller than the replica set
	UnderMinISR     int   // partitions whose ISR is below min.insync.replicas
	Shrinks         int64 // cumulative ISR shrinks (IsrShrinksPerSec as a total, plus the controller's on fencing)
	Expands         int64 // cumulative ISR expands
	// ControllerShrinks is the part of Shrinks the controller made itself (KRaft: a fenced
	// broker removed from the ISRs); the rest are the leaders' AlterPartition shrinks.
	ControllerShrinks int64
	Leaders           []int32 // per partition, -1 if none
	// HWTotal and LEOTotal sum the leaders' HW and LEO over the partitions (exclusive offsets);
	// MaxLag is Kafka's MaxLag (records) over the leaders. Zero when the target cannot tell.
	HWTotal, LEOTotal, MaxLag int64
}

// TargetOptions configure a target.
type TargetOptions struct {
	// OnHWLag receives the core's leader append -> HW lag (ns, records) (embedded only).
	OnHWLag func(lagNs, records int64)
	// OnDamage receives every damaged batch a broker finds in its replicas (embedded only;
	// the broker's Config.OnDamage: called on the goroutine that found it, must not block).
	OnDamage func(broker.DamageReport)
	Log      io.Writer
	// Seed drives random fault targets (any-follower).
	Seed uint64
	// FS is the file system under the embedded brokers' data directories (tests inject
	// storage failures); nil = the OS.
	FS vfs.FS
}

// embeddedTarget is set by embedded.go (the netfetch embedded cluster).
var embeddedTarget func(ctx context.Context, s *spec.Spec, o TargetOptions) (Target, error)

// OpenTarget starts or connects to the target named by name ("embedded" or
// "kafka://host:port[,host:port]").
func OpenTarget(ctx context.Context, name string, s *spec.Spec, o TargetOptions) (Target, error) {
	hosts, err := spec.CheckTarget(name, s)
	if err != nil {
		return nil, err
	}
	if err := s.CheckClientTarget(name); err != nil {
		return nil, err
	}
	if name == "kfake" {
		return openKfake(s)
	}
	if hosts == nil {
		if embeddedTarget == nil {
			return nil, errors.New("embedded target: not built into this binary")
		}
		return embeddedTarget(ctx, s, o)
	}
	sec, err := ClientSecurity(ctx, name, hosts, s)
	if err != nil {
		return nil, err // unreachable too: the run cannot start
	}
	return newKafkaTarget(name, hosts, s.Topic.MinInsyncReplicas, sec)
}

// openKfake starts franz-go's kfake, an in-process fake Kafka cluster with the spec's broker
// count, and drives it as a kafka:// target: the reference that shows how much of a latency
// figure is client and protocol and how much is replication. kfake does not replicate (one
// copy of each partition, acks=all answered at once), keeps everything in memory, writes no
// files, has no ISR, HW lag, faults or broker configs; its request handling is one goroutine
// for the whole cluster. Its memory is bounded as the embedded cluster's disk is: it gets the
// spec's log.segment.bytes, log.retention.bytes and log.retention.ms, its retention runs
// every log.retention.check.interval.ms (kfake applies retention only when asked: Cluster.
// ApplyRetention), and once more before the read-back (Inspection.Retention). A partition
// then holds at most about retention + segment bytes (320 MiB with the harness's defaults);
// the process needs up to about four times that (kfake's segment buffers grow by copying, and
// the heap grows to twice what is live before a GC): `isrbench sweep -w max-throughput --vary
// target=embedded,kfake --vary topic.partitions=1,6` peaked at 9.6 GB. Without it, a run as
// fast as possible kept every record: 6 s at up to 770k records/s of 1 KiB filled 24 GB and
// the sweep did not end.
func openKfake(s *spec.Spec) (Target, error) {
	cfgs := map[string]string{}
	for _, k := range []string{"log.segment.bytes", "log.retention.bytes", "log.retention.ms"} {
		v, err := s.Get(k)
		if err != nil {
			return nil, fmt.Errorf("target kfake: %w", err)
		}
		cfgs[k] = fmt.Sprint(v)
	}
	v, err := s.Get("log.retention.check.interval.ms") // validated: 1 ms or more
	if err != nil {
		return nil, fmt.Errorf("target kfake: %w", err)
	}
	every := time.Duration(v.(int64)) * time.Millisecond
	c, err := kfake.NewCluster(kfake.NumBrokers(max(1, s.Brokers)), kfake.BrokerConfigs(cfgs))
	if err != nil {
		return nil, fmt.Errorf("target kfake: %w", err)
	}
	t, err := newKafkaTarget("kfake", c.ListenAddrs(), s.Topic.MinInsyncReplicas, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				c.ApplyRetention()
			case <-stop:
				return
			}
		}
	}()
	t.retention = c
	t.closeFn = func() {
		close(stop)
		<-done
		c.Close()
	}
	return t, nil
}

// kafkaTarget is any Kafka-protocol cluster reached through franz-go. ISR shrinks/expands are
// inferred from ISR changes between samples (a change missed between two samples is missed).
type kafkaTarget struct {
	closeFn   func()           // stops an in-process cluster (kfake)
	retention retentionApplier // runs an in-process cluster's retention now (kfake), or nil
	name      string
	seeds     []string
	sec       []kgo.Opt // the clients' security options (TLS, SASL); nil: PLAINTEXT
	cl        *kgo.Client
	adm       *kadm.Client
	minISR    int
	// sample state (Sample's goroutine only)
	lastISR          map[int32]int
	shrinks, expands int64
}

func newKafkaTarget(name string, seeds []string, minISR int, sec []kgo.Opt) (*kafkaTarget, error) {
	// kadm answers Metadata from kgo's cache while it is younger than MetadataMinAge (5 s
	// by default): the timeline and the exec faults' targets need the cluster's state now.
	cl, err := kgo.NewClient(append(ClientOpts(seeds, sec), kgo.MetadataMinAge(FreshMetadata))...)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", name, err)
	}
	return &kafkaTarget{name: name, seeds: seeds, sec: sec, cl: cl, adm: kadm.NewClient(cl), lastISR: map[int32]int{}, minISR: minISR}, nil
}

func (k *kafkaTarget) clientSecurity() []kgo.Opt { return k.sec }
func (k *kafkaTarget) Name() string              { return k.name }
func (k *kafkaTarget) Seeds() []string           { return k.seeds }
func (k *kafkaTarget) HasHWLag() bool            { return false }
func (k *kafkaTarget) Close() error {
	k.cl.Close()
	if k.closeFn != nil {
		k.closeFn()
	}
	return nil
}

func (k *kafkaTarget) ApplyFault(_ context.Context, _ string, f spec.Fault) (string, func() error, error) {
	return "", nil, fmt.Errorf("fault kind %s needs the embedded target (a kafka:// cluster cannot be paused or killed from inside this process); use kind exec", f.Kind)
}

func (k *kafkaTarget) Sample(ctx context.Context, topic string) (Sample, error) {
	md, err := k.adm.Metadata(ctx, topic)
	if err != nil {
		return Sample{}, err
	}
	return sampleFromMetadata(md, topic, k.minISR, k.lastISR, &k.shrinks, &k.expands)
}

func sampleFromMetadata(md kadm.Metadata, topic string, minISR int, last map[int32]int, shrinks, expands *int64) (Sample, error) {
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return Sample{}, fmt.Errorf("metadata for %s: %v", topic, td.Err)
	}
	s := Sample{ISRMin: int(^uint(0) >> 1)}
	parts := td.Partitions.Sorted()
	for _, p := range parts {
		n := len(p.ISR)
		s.ISRMin = min(s.ISRMin, n)
		s.ISRMax = max(s.ISRMax, n)
		if n < len(p.Replicas) {
			s.UnderReplicated++
		}
		if minISR > 0 && n < minISR {
			s.UnderMinISR++
		}
		if prev, ok := last[p.Partition]; ok {
			if n < prev {
				*shrinks += int64(prev - n)
			} else if n > prev {
				*expands += int64(n - prev)
			}
		}
		last[p.Partition] = n
		s.Leaders = append(s.Leaders, p.Leader)
	}
	if len(parts) == 0 {
		s.ISRMin = 0
	}
	s.Shrinks, s.Expands = *shrinks, *expands
	return s, nil
}

// EnsureTopic creates the topic (with configs, see run.topicConfigs) if it does not exist
// and waits until every partition has a leader and its full replica set in the ISR: deadline,
// plus cluster.ApplyAllowance per replica (a topic of many partitions takes a while to appear).
func EnsureTopic(ctx context.Context, adm *kadm.Client, s *spec.Spec, configs map[string]*string, deadline time.Duration) (created bool, err error) {
	deadline += time.Duration(s.Topic.Partitions*s.Topic.ReplicationFactor) * cluster.ApplyAllowance
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, int32(s.Topic.Partitions), int16(s.Topic.ReplicationFactor),
		configs, s.Topic.Name)
	switch {
	case err == nil && resp.Err == nil:
		created = true
	case errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(resp.Err, kerr.TopicAlreadyExists):
	case err != nil:
		return false, fmt.Errorf("create topic %s: %w", s.Topic.Name, err)
	default:
		return false, fmt.Errorf("create topic %s: %w", s.Topic.Name, resp.Err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var why string
	for {
		md, err := adm.Metadata(ctx, s.Topic.Name)
		why = readyProblem(md, err, s)
		if why == "" {
			if n := len(md.Topics[s.Topic.Name].Partitions); n != s.Topic.Partitions {
				return created, fmt.Errorf("topic %s exists with %d partitions, the spec says topic.partitions=%d: delete it or --set topic.partitions=%d",
					s.Topic.Name, n, s.Topic.Partitions, n)
			}
			return created, nil
		}
		select {
		case <-ctx.Done():
			return created, fmt.Errorf("topic %s not ready after %s: %s", s.Topic.Name, deadline, why)
		case <-tick.C:
		}
	}
}

func readyProblem(md kadm.Metadata, err error, s *spec.Spec) string {
	if err != nil {
		return err.Error()
	}
	td, ok := md.Topics[s.Topic.Name]
	if !ok {
		return "not in metadata"
	}
	if td.Err != nil {
		return td.Err.Error()
	}
	if len(td.Partitions) == 0 {
		return "no partitions"
	}
	var bad []string
	for _, p := range td.Partitions.Sorted() {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
			bad = append(bad, fmt.Sprintf("%d(leader %d, isr %v of %v)", p.Partition, p.Leader, p.ISR, p.Replicas))
		}
	}
	if len(bad) > 0 {
		return "partitions without a leader or full ISR: " + strings.Join(bad, " ")
	}
	return ""
}

// ListOffsets returns the offsets of every partition: end=true -> HW (ListOffsets latest,
// read_uncommitted), else log start. Index = partition. Retriable errors (a broker that has
// not yet applied the new topic, a leader moving) are retried for up to 15 s.
func ListOffsets(ctx context.Context, adm *kadm.Client, topic string, n int, end bool) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		offs, retriable, err := listOffsetsOnce(ctx, adm, topic, n, end)
		if err == nil || !retriable {
			return offs, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-tick.C:
		}
	}
}

func listOffsetsOnce(ctx context.Context, adm *kadm.Client, topic string, n int, end bool) (_ []int64, retriable bool, _ error) {
	var lo kadm.ListedOffsets
	var err error
	if end {
		lo, err = adm.ListEndOffsets(ctx, topic)
	} else {
		lo, err = adm.ListStartOffsets(ctx, topic)
	}
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make([]int64, n)
	var bad []string
	retriable = true
	for p := 0; p < n; p++ {
		o, ok := lo.Lookup(topic, int32(p))
		if !ok || o.Err != nil {
			bad = append(bad, fmt.Sprintf("%d: %v", p, o.Err))
			if ok && !kerr.IsRetriable(o.Err) {
				retriable = false
			}
			continue
		}
		out[p] = o.Offset
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, retriable, fmt.Errorf("list offsets of %s: %s", topic, strings.Join(bad, "; "))
	}
	return out, false, nil
}
