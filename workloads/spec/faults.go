package spec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FaultKinds lists the fault kinds (canonical names).
var FaultKinds = []string{"pause-broker", "kill-broker", "restart-broker", "crash-broker", "slow-link", "partition", "exec", "reassign", "restart-producer"}

// ExternalFaultKinds are the kinds a kafka:// target can apply (the others act on the
// embedded cluster's brokers from inside the process; restart-producer acts on the harness's
// own producer, whatever the target).
var ExternalFaultKinds = []string{"exec", "restart-producer"}

// faultKindAliases are the short names accepted for compatibility with older specs.
var faultKindAliases = map[string]string{
	"pause": "pause-broker", "kill": "kill-broker", "restart": "restart-broker", "crash": "crash-broker",
}

// CanonicalFaultKind maps a kind or its alias to the canonical kind; an error names the allowed
// values.
func CanonicalFaultKind(field, v string) (string, error) {
	if c, ok := faultKindAliases[v]; ok {
		return c, nil
	}
	if slices.Contains(FaultKinds, v) {
		return v, nil
	}
	return "", fmt.Errorf("%s: %q is not allowed; allowed %s (or pause|kill|restart|crash)", field, v, strings.Join(FaultKinds, "|"))
}

// targetForms is the help text for faults[].target.
const targetForms = "a broker id, leader-of:TOPIC-PARTITION, follower-of:TOPIC-PARTITION, any-follower, " +
	"leader or follower (of faults[].partition of the benchmark topic); partition also takes two groups of broker ids, e.g. 0|1,2"

// OffsetsTopic is Kafka's internal topic of committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// TargetRef is a parsed fault target: a broker by id, or a role resolved when the fault starts.
type TargetRef struct {
	// Role is "id", "leader", "follower" (the first ISR follower) or "any-follower" (a
	// random ISR follower).
	Role string
	// ID is the broker for Role "id".
	ID int32
	// Topic and Partition name the partition whose leader or follower is meant ("" = the
	// benchmark topic).
	Topic     string
	Partition int
}

func (t TargetRef) String() string {
	switch t.Role {
	case "id":
		return strconv.Itoa(int(t.ID))
	case "any-follower":
		return fmt.Sprintf("any-follower of %s-%d", t.Topic, t.Partition)
	}
	return fmt.Sprintf("%s-of:%s-%d", t.Role, t.Topic, t.Partition)
}

// ParsedTarget is a fault's target after parsing: one broker (Ref), or for kind partition
// optionally two explicit groups of brokers (Groups; then Ref is unused).
type ParsedTarget struct {
	Ref    TargetRef
	Groups [2][]int32
}

// IsGroups reports whether the target names two explicit groups of brokers.
func (p ParsedTarget) IsGroups() bool { return len(p.Groups[0]) > 0 }

// ParseFaultTarget parses f.Target for a spec with brokers brokers and benchmark topic topic
// (partitions partitions); leader-of: and follower-of: may also name a partition of the
// internal __consumer_offsets topic (offsetsPartitions partitions), whose leader coordinates
// a consumer group. field names the key in errors.
func ParseFaultTarget(field string, f Fault, brokers int, topic string, partitions, offsetsPartitions int) (ParsedTarget, error) {
	v := strings.TrimSpace(f.Target)
	bad := func(why string) (ParsedTarget, error) {
		return ParsedTarget{}, fmt.Errorf("%s: %q %s; allowed %s (broker ids 0..%d)", field, f.Target, why, targetForms, brokers-1)
	}
	brokerID := func(s string) (int32, bool) {
		id, err := strconv.Atoi(strings.TrimSpace(s))
		// An exec fault may name any broker id of an external cluster (its ids need not be
		// 0..brokers-1); the target checks it against the cluster's metadata when it runs.
		if err != nil || id < 0 || id > math.MaxInt32 || (id >= brokers && f.Kind != "exec") {
			return 0, false
		}
		return int32(id), true
	}
	if strings.Contains(v, "|") {
		if f.Kind != "partition" {
			return bad("names two groups, which only kind partition takes")
		}
		a, b, _ := strings.Cut(v, "|")
		var pt ParsedTarget
		seen := map[int32]bool{}
		for gi, g := range []string{a, b} {
			for _, x := range strings.Split(g, ",") {
				id, ok := brokerID(x)
				if !ok {
					return bad(fmt.Sprintf("has %q, not a broker id", strings.TrimSpace(x)))
				}
				if seen[id] {
					return bad(fmt.Sprintf("names broker %d twice", id))
				}
				seen[id] = true
				pt.Groups[gi] = append(pt.Groups[gi], id)
			}
		}
		return pt, nil
	}
	switch {
	case v == "leader" || v == "follower":
		return ParsedTarget{Ref: TargetRef{Role: v, Topic: topic, Partition: f.Partition}}, nil
	case v == "any-follower":
		return ParsedTarget{Ref: TargetRef{Role: "any-follower", Topic: topic, Partition: f.Partition}}, nil
	case strings.HasPrefix(v, "leader-of:") || strings.HasPrefix(v, "follower-of:"):
		role, tp, _ := strings.Cut(v, "-of:")
		i := strings.LastIndexByte(tp, '-')
		if i <= 0 {
			return bad("has no TOPIC-PARTITION after " + role + "-of:")
		}
		p, err := strconv.Atoi(tp[i+1:])
		if err != nil || p < 0 {
			return bad(fmt.Sprintf("has partition %q, not a partition number", tp[i+1:]))
		}
		t := tp[:i]
		n := partitions
		switch t {
		case topic:
		case OffsetsTopic:
			n = offsetsPartitions
		case TxnStateTopic: // the transaction coordinators' (txn.go)
			n = TxnStatePartitions
		default:
			return bad(fmt.Sprintf("names topic %q, which the spec does not have (its topic is %s: %s-0..%s-%d; or %s-0..%s-%d)",
				t, topic, topic, topic, partitions-1, OffsetsTopic, OffsetsTopic, offsetsPartitions-1))
		}
		if p >= n {
			return bad(fmt.Sprintf("names partition %d, but topic %s has %d partitions", p, t, n))
		}
		return ParsedTarget{Ref: TargetRef{Role: role, Topic: t, Partition: p}}, nil
	}
	id, ok := brokerID(v)
	if !ok {
		return bad("is not a target")
	}
	return ParsedTarget{Ref: TargetRef{Role: "id", ID: id}}, nil
}

// validateFaults checks the fault schedule against the rest of the spec.
func (s *Spec) validateFaults() error {
	for i, f := range s.Faults {
		if _, err := CanonicalFaultKind(fmt.Sprintf("faults[%d].kind", i), f.Kind); err != nil {
			return err
		}
		if f.At >= s.Duration {
			return fmt.Errorf("faults[%d].at: %s is not inside the measurement (duration %s); allowed 0s..%s (exclusive)",
				i, f.At, s.Duration, s.Duration)
		}
		if f.Partition >= s.Topic.Partitions {
			return fmt.Errorf("faults[%d].partition: %d, topic has %d partitions; allowed 0..%d",
				i, f.Partition, s.Topic.Partitions, s.Topic.Partitions-1)
		}
		if f.Kind == "restart-producer" {
			if err := s.validateProducerRestart(i, f); err != nil {
				return err
			}
			continue
		}
		if _, err := ParseFaultTarget(fmt.Sprintf("faults[%d].target", i), f, s.Brokers, s.Topic.Name, s.Topic.Partitions, int(s.Settings.Int("offsets.topic.num.partitions"))); err != nil {
			return err
		}
		if f.Kind != "slow-link" && (f.Latency != 0 || f.Jitter != 0 || f.Bandwidth != 0) {
			return fmt.Errorf("faults[%d]: latency/jitter/bandwidth apply only to kind slow-link, not %s", i, f.Kind)
		}
		if f.Kind == "slow-link" && f.Latency == 0 && f.Bandwidth == 0 {
			return fmt.Errorf("faults[%d]: slow-link needs latency or bandwidth (bytes/s per connection)", i)
		}
		if f.Jitter > 0 && f.Latency == 0 {
			return fmt.Errorf("faults[%d].jitter: %s without latency; set faults[%d].latency too", i, f.Jitter, i)
		}
		if f.Fence != "" && f.Kind != "kill-broker" && f.Kind != "crash-broker" {
			return fmt.Errorf("faults[%d].fence applies only to kill-broker and crash-broker, not %s", i, f.Kind)
		}
		if f.Kind == "restart-broker" && f.Duration != 0 {
			return fmt.Errorf("faults[%d].duration: %s; restart-broker is instantaneous, allowed 0s (to keep a broker down, use kill-broker with a duration)", i, f.Duration)
		}
		if (f.Kind == "slow-link" || f.Kind == "partition" || f.Kind == "pause-broker") && f.Duration == 0 {
			return fmt.Errorf("faults[%d].duration: %s needs a duration > 0 (it is healed after it)", i, f.Kind)
		}
		if err := validateExecFault(i, f); err != nil {
			return err
		}
		if err := s.validateReassignFault(i, f); err != nil {
			return err
		}
	}
	return nil
}

// A restart-producer fault kills transactional producer N (its target: the producer's number
// over every group, from 0, as in its transactional.id PREFIX-N) in the middle of a
// transaction and starts it again with the same transactional.id, as a producer process
// crashing and coming back does:
//
//	faults:
//	  - {at: 2s, kind: restart-producer, target: 0}
//
// The new instance's InitProducerId bumps the producer epoch, which fences the old instance
// (a zombie) and aborts its open transaction; the zombie then tries to commit it and must be
// refused. It is instantaneous (no duration) and runs against every target.

// ParseProducerTarget parses a restart-producer fault's target: a producer number
// 0..producers-1.
func ParseProducerTarget(field, v string, producers int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n >= producers {
		return 0, fmt.Errorf("%s: %q is not a producer; allowed a transactional producer's number 0..%d (its transactional.id is PREFIX-N)", field, v, producers-1)
	}
	return n, nil
}

// validateProducerRestart checks restart-producer fault i: an instantaneous fault whose
// target is a transactional producer of the spec.
func (s *Spec) validateProducerRestart(i int, f Fault) error {
	if f.Duration != 0 {
		return fmt.Errorf("faults[%d].duration: %s; restart-producer is instantaneous, allowed 0s", i, f.Duration)
	}
	total := 0
	for _, g := range s.ProducerGroups() {
		total += g.Count
	}
	n, err := ParseProducerTarget(fmt.Sprintf("faults[%d].target", i), f.Target, total)
	if err != nil {
		return err
	}
	global := 0
	for _, g := range s.ProducerGroups() {
		if n < global+g.Count {
			if g.Txn.ID == "" {
				return fmt.Errorf("faults[%d].target: producer %d is not transactional; restart-producer needs producers.transactional.id", i, n)
			}
			return nil
		}
		global += g.Count
	}
	return nil
}
