package kafkatool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// What `isrbench reassign` does (kafka-reassign-partitions.sh): --generate proposes a
// reassignment of topics onto a broker list, --execute starts one from a reassignment JSON
// file (optionally with a replication throttle), --verify reports its progress and clears
// the throttles once it is complete, --cancel cancels it, --list lists those in progress.
// The JSON formats are Kafka's:
//
//	topics to move:  {"version":1,"topics":[{"topic":"foo"}]}
//	reassignment:    {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}
//
// log_dirs may be left out; isrbench brokers have one log directory, so a value other than
// "any" is refused.

// Kafka's throttle config names (QuotaConfig and the topic configs of KIP-73).
const (
	leaderRate       = "leader.replication.throttled.rate"
	followerRate     = "follower.replication.throttled.rate"
	leaderReplicas   = "leader.replication.throttled.replicas"
	followerReplicas = "follower.replication.throttled.replicas"
)

// TopicsToMove is the --topics-to-move-json-file format.
type TopicsToMove struct {
	Version int `json:"version"`
	Topics  []struct {
		Topic string `json:"topic"`
	} `json:"topics"`
}

// Reassignment is the --reassignment-json-file format (and what --generate prints).
type Reassignment struct {
	Version    int                     `json:"version"`
	Partitions []PartitionReassignment `json:"partitions"`
}

// PartitionReassignment is one partition's target replicas.
type PartitionReassignment struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

func (p PartitionReassignment) String() string { return p.Topic + "-" + strconv.Itoa(int(p.Partition)) }

// ParseTopicsToMove reads and checks a topics-to-move JSON document.
func ParseTopicsToMove(data []byte) ([]string, error) {
	var doc TopicsToMove
	if err := strictJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("topics-to-move JSON: %w (want {\"version\":1,\"topics\":[{\"topic\":\"foo\"}]})", err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("topics-to-move JSON: version %d: only version 1 is known", doc.Version)
	}
	var out []string
	for _, t := range doc.Topics {
		if t.Topic == "" {
			return nil, errors.New("topics-to-move JSON: a topic entry has no \"topic\"")
		}
		if slices.Contains(out, t.Topic) {
			return nil, fmt.Errorf("topics-to-move JSON: topic %q is given twice", t.Topic)
		}
		out = append(out, t.Topic)
	}
	if len(out) == 0 {
		return nil, errors.New("topics-to-move JSON: no topics")
	}
	return out, nil
}

// ParseReassignment reads and checks a reassignment JSON document: version 1, each partition
// once, a non-empty replica list without duplicates or negative ids, log_dirs absent or all
// "any" and as long as replicas.
func ParseReassignment(data []byte) (Reassignment, error) {
	var doc Reassignment
	if err := strictJSON(data, &doc); err != nil {
		return doc, fmt.Errorf("reassignment JSON: %w (want {\"version\":1,\"partitions\":[{\"topic\":\"foo\",\"partition\":0,\"replicas\":[1,2,3]}]})", err)
	}
	if doc.Version != 1 {
		return doc, fmt.Errorf("reassignment JSON: version %d: only version 1 is known", doc.Version)
	}
	if len(doc.Partitions) == 0 {
		return doc, errors.New("reassignment JSON: no partitions")
	}
	seen := map[string]bool{}
	for _, p := range doc.Partitions {
		switch {
		case p.Topic == "":
			return doc, fmt.Errorf("reassignment JSON: partition %d has no topic", p.Partition)
		case p.Partition < 0:
			return doc, fmt.Errorf("reassignment JSON: %s: a partition is >= 0", p)
		case seen[p.String()]:
			return doc, fmt.Errorf("reassignment JSON: partition %s is given twice", p)
		case len(p.Replicas) == 0:
			return doc, fmt.Errorf("reassignment JSON: partition %s has an empty replica list", p)
		case p.LogDirs != nil && len(p.LogDirs) != len(p.Replicas):
			return doc, fmt.Errorf("reassignment JSON: partition %s has %d log_dirs for %d replicas", p, len(p.LogDirs), len(p.Replicas))
		}
		seen[p.String()] = true
		for i, r := range p.Replicas {
			if r < 0 || slices.Contains(p.Replicas[:i], r) {
				return doc, fmt.Errorf("reassignment JSON: partition %s: replicas %v: broker ids are >= 0 and given once", p, p.Replicas)
			}
		}
		for _, d := range p.LogDirs {
			if d != "any" {
				return doc, fmt.Errorf("reassignment JSON: partition %s: log dir %q: isrbench brokers have one log directory, only \"any\" is accepted", p, d)
			}
		}
	}
	return doc, nil
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// FormatReassignment prints doc as Kafka's tool does: one line of JSON, log_dirs "any".
func FormatReassignment(doc Reassignment) string {
	doc.Version = 1
	for i := range doc.Partitions {
		p := &doc.Partitions[i]
		if p.LogDirs == nil {
			p.LogDirs = slices.Repeat([]string{"any"}, len(p.Replicas))
		}
	}
	b, _ := json.Marshal(doc) // plain structs: cannot fail
	return string(b)
}

// partitionsOf describes topics and returns their partitions' current replicas, sorted.
func partitionsOf(ctx context.Context, adm *kadm.Client, topics []string) (map[string]map[int32][]int32, error) {
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32][]int32{}
	for _, name := range topics {
		d, ok := td[name]
		if !ok || d.Err != nil {
			e := error(errors.New("not found"))
			if ok && d.Err != nil {
				e = d.Err
			}
			return nil, fmt.Errorf("topic %s: %w", name, e)
		}
		out[name] = map[int32][]int32{}
		for _, p := range d.Partitions {
			out[name][p.Partition] = slices.Clone(p.Replicas)
		}
	}
	return out, nil
}

// currentOf returns the current replicas of doc's partitions, in doc's order; an unknown
// topic or partition is an error, as Kafka's "Unable to find partition".
func currentOf(ctx context.Context, adm *kadm.Client, doc Reassignment) (Reassignment, error) {
	var topics []string
	for _, p := range doc.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	parts, err := partitionsOf(ctx, adm, topics)
	if err != nil {
		return Reassignment{}, err
	}
	cur := Reassignment{Version: 1}
	for _, p := range doc.Partitions {
		r, ok := parts[p.Topic][p.Partition]
		if !ok {
			return Reassignment{}, fmt.Errorf("unable to find partition %s", p)
		}
		cur.Partitions = append(cur.Partitions, PartitionReassignment{Topic: p.Topic, Partition: p.Partition, Replicas: r})
	}
	return cur, nil
}

// Generate proposes moving every partition of topics onto brokers, keeping each topic's
// replication factor, and prints the current and the proposed assignment. The placement
// is Kafka's rack-unaware one (AdminUtils.assignReplicasToBrokers) with a fixed start: the
// first replicas go round-robin over brokers, the followers at a shift that grows every
// len(brokers) partitions; the same input gives the same proposal.
func Generate(ctx context.Context, adm *kadm.Client, topics []string, brokers []int32, w io.Writer) error {
	if len(brokers) == 0 {
		return errors.New("reassign: --broker-list is empty")
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	known := md.Brokers.NodeIDs()
	for _, b := range brokers {
		if !slices.Contains(known, b) {
			return fmt.Errorf("reassign: --broker-list names broker %d; the cluster's brokers are %s", b, joinInt32(known))
		}
	}
	parts, err := partitionsOf(ctx, adm, topics)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	cur, prop := Reassignment{Version: 1}, Reassignment{Version: 1}
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		ps := parts[name]
		n := len(ps)
		for p := int32(0); p < int32(n); p++ {
			r, ok := ps[p]
			if !ok {
				return fmt.Errorf("reassign: topic %s: partition %d missing from its metadata", name, p)
			}
			rf := len(r)
			if rf > len(brokers) {
				return fmt.Errorf("reassign: topic %s has replication factor %d, more than the %d brokers of --broker-list", name, rf, len(brokers))
			}
			cur.Partitions = append(cur.Partitions, PartitionReassignment{Topic: name, Partition: p, Replicas: r})
			prop.Partitions = append(prop.Partitions, PartitionReassignment{Topic: name, Partition: p, Replicas: placeReplicas(int(p), rf, brokers)})
		}
	}
	fmt.Fprintf(w, "Current partition replica assignment\n%s\n\nProposed partition reassignment configuration\n%s\n", FormatReassignment(cur), FormatReassignment(prop))
	return nil
}

// placeReplicas is Kafka's rack-unaware placement of partition p with rf replicas over
// brokers, start index and initial shift 0.
func placeReplicas(p, rf int, brokers []int32) []int32 {
	n := len(brokers)
	shift := p / n
	first := p % n
	out := []int32{brokers[first]}
	for j := 0; j < rf-1; j++ {
		s := 1 + (shift+j)%(n-1)
		out = append(out, brokers[(first+s)%n])
	}
	return out
}

// Execute starts the reassignment doc: it prints the current assignment (to save for a
// rollback), refuses when a reassignment of any partition is in progress unless additional,
// sets the throttle when throttle > 0 (as Kafka's tool: the topic configs
// leader.replication.throttled.replicas on every current replica of each moving partition
// and follower.replication.throttled.replicas on every replica it adds, and the broker
// configs leader/follower.replication.throttled.rate on every broker involved), then
// sends AlterPartitionReassignments.
func Execute(ctx context.Context, adm *kadm.Client, doc Reassignment, throttle int64, additional bool, w io.Writer) error {
	cur, err := currentOf(ctx, adm, doc)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	known := md.Brokers.NodeIDs()
	for _, p := range doc.Partitions {
		for _, b := range p.Replicas {
			if !slices.Contains(known, b) {
				return fmt.Errorf("reassign: partition %s: unknown broker %d (the cluster's brokers are %s)", p, b, joinInt32(known))
			}
		}
	}
	ongoing, err := listOngoing(ctx, adm, nil)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	if len(ongoing) > 0 && !additional {
		return fmt.Errorf("reassign: cannot execute because there is an existing partition reassignment (%s); use --additional to override it and add a new one", joinNames(ongoing))
	}
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", FormatReassignment(cur))
	if throttle > 0 {
		if err := setThrottles(ctx, adm, cur, doc, throttle, w); err != nil {
			return fmt.Errorf("reassign: %w", err)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range doc.Partitions {
		req.Assign(p.Topic, p.Partition, p.Replicas)
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	var ok, failed []string
	for _, r := range resp.Sorted() {
		name := r.Topic + "-" + strconv.Itoa(int(r.Partition))
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v%s", name, r.Err, errDetail(r.ErrMessage)))
			continue
		}
		ok = append(ok, name)
	}
	if len(ok) > 0 {
		fmt.Fprintf(w, "Successfully started partition reassignment(s) for %s\n", strings.Join(ok, ","))
	}
	if len(failed) > 0 {
		return fmt.Errorf("reassign: error reassigning partition(s):\n%s", strings.Join(failed, "\n"))
	}
	return nil
}

// setThrottles sets Kafka's throttle configs for moving cur to target.
func setThrottles(ctx context.Context, adm *kadm.Client, cur, target Reassignment, rate int64, w io.Writer) error {
	leader := map[string][]string{}
	follower := map[string][]string{}
	var brokers []int32
	for i, p := range target.Partitions {
		now := cur.Partitions[i].Replicas
		if slices.Equal(now, p.Replicas) {
			continue
		}
		for _, b := range now {
			leader[p.Topic] = append(leader[p.Topic], fmt.Sprintf("%d:%d", p.Partition, b))
		}
		for _, b := range p.Replicas {
			if !slices.Contains(now, b) {
				follower[p.Topic] = append(follower[p.Topic], fmt.Sprintf("%d:%d", p.Partition, b))
			}
		}
		for _, b := range append(slices.Clone(now), p.Replicas...) {
			if !slices.Contains(brokers, b) {
				brokers = append(brokers, b)
			}
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(leader)) {
		l, f := strings.Join(leader[topic], ","), strings.Join(follower[topic], ",")
		ops := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: leaderReplicas, Value: &l}}
		if f != "" {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: followerReplicas, Value: &f})
		}
		if err := alterErr(adm.AlterTopicConfigs(ctx, ops, topic)); err != nil {
			return fmt.Errorf("setting the throttled replicas of topic %s: %w", topic, err)
		}
	}
	slices.Sort(brokers)
	v := strconv.FormatInt(rate, 10)
	ops := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: leaderRate, Value: &v}, {Op: kadm.SetConfig, Name: followerRate, Value: &v}}
	for _, b := range brokers {
		if err := alterErr(adm.AlterBrokerConfigs(ctx, ops, b)); err != nil {
			return fmt.Errorf("setting the throttle rate of broker %d: %w", b, err)
		}
	}
	fmt.Fprintf(w, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n")
	fmt.Fprintf(w, "The inter-broker throttle limit was set to %d B/s\n", rate)
	return nil
}

// listOngoing returns the reassignments in progress (of every topic when topics is nil).
func listOngoing(ctx context.Context, adm *kadm.Client, doc *Reassignment) ([]kadm.ListPartitionReassignmentsResponse, error) {
	var resp kadm.ListPartitionReassignmentsResponses
	var err error
	if doc == nil {
		resp, err = listAll(ctx, adm)
	} else {
		set := kadm.TopicsSet{}
		for _, p := range doc.Partitions {
			set.Add(p.Topic, p.Partition)
		}
		resp, err = adm.ListPartitionReassignments(ctx, set)
	}
	if err != nil {
		return nil, err
	}
	return resp.Sorted(), nil
}

// listAll lists the reassignments of every topic of the cluster, the internal ones
// (__consumer_offsets, __transaction_state) included, as Kafka's --list does.
func listAll(ctx context.Context, adm *kadm.Client) (kadm.ListPartitionReassignmentsResponses, error) {
	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, d := range td.Sorted() {
		for _, p := range d.Partitions.Sorted() {
			set.Add(d.Topic, p.Partition)
		}
	}
	if len(set) == 0 {
		return kadm.ListPartitionReassignmentsResponses{}, nil
	}
	return adm.ListPartitionReassignments(ctx, set)
}

func joinNames(rs []kadm.ListPartitionReassignmentsResponse) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Topic + "-" + strconv.Itoa(int(r.Partition))
	}
	return strings.Join(s, ",")
}

// List prints the reassignments in progress as Kafka's tool does.
func List(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	rs, err := listOngoing(ctx, adm, nil)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	if len(rs) == 0 {
		fmt.Fprintln(w, "No partition reassignments found.")
		return nil
	}
	fmt.Fprintln(w, "Current partition reassignments:")
	for _, r := range rs {
		fmt.Fprintf(w, "%s-%d: replicas: %s. adding: %s. removing: %s.\n", r.Topic, r.Partition, joinInt32(r.Replicas), joinInt32(r.AddingReplicas), joinInt32(r.RemovingReplicas))
	}
	return nil
}

// ErrIncomplete is returned by Verify when a partition's reassignment is still in progress
// or its replicas are not the target.
var ErrIncomplete = errors.New("reassignment not complete")

// Verify prints the state of each partition of doc: still in progress, completed, or no
// reassignment but other replicas than the target. Once every one is complete it clears
// the throttles Execute set (unless preserveThrottles): the throttled replicas configs of
// doc's topics and the throttle rates of every broker. It returns ErrIncomplete (exit 1)
// while any is not complete.
func Verify(ctx context.Context, adm *kadm.Client, doc Reassignment, preserveThrottles bool, w io.Writer) error {
	cur, err := currentOf(ctx, adm, doc)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	ongoing, err := listOngoing(ctx, adm, &doc)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	fmt.Fprintln(w, "Status of partition reassignment:")
	complete := true
	for i, p := range doc.Partitions {
		inProgress := slices.ContainsFunc(ongoing, func(r kadm.ListPartitionReassignmentsResponse) bool {
			return r.Topic == p.Topic && r.Partition == p.Partition
		})
		now := cur.Partitions[i].Replicas
		switch {
		case inProgress:
			complete = false
			fmt.Fprintf(w, "Reassignment of partition %s is still in progress.\n", p)
		case slices.Equal(now, p.Replicas):
			fmt.Fprintf(w, "Reassignment of partition %s is completed.\n", p)
		default:
			complete = false
			fmt.Fprintf(w, "There is no active reassignment of partition %s, but replica set is %s rather than %s.\n", p, joinInt32(now), joinInt32(p.Replicas))
		}
	}
	if !complete {
		return ErrIncomplete
	}
	if !preserveThrottles {
		if err := clearThrottles(ctx, adm, doc, w); err != nil {
			return fmt.Errorf("reassign: %w", err)
		}
	}
	return nil
}

// clearThrottles removes the throttle configs: the throttled replicas of doc's topics, the
// rates of every broker (Kafka's clearAllThrottles).
func clearThrottles(ctx context.Context, adm *kadm.Client, doc Reassignment, w io.Writer) error {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	brokers := md.Brokers.NodeIDs()
	slices.Sort(brokers)
	ops := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderRate}, {Op: kadm.DeleteConfig, Name: followerRate}}
	for _, b := range brokers {
		if err := alterErr(adm.AlterBrokerConfigs(ctx, ops, b)); err != nil {
			return fmt.Errorf("clearing the throttle rate of broker %d: %w", b, err)
		}
	}
	fmt.Fprintf(w, "Clearing broker-level throttles on brokers %s\n", joinInt32(brokers))
	var topics []string
	for _, p := range doc.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	slices.Sort(topics)
	tops := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderReplicas}, {Op: kadm.DeleteConfig, Name: followerReplicas}}
	for _, t := range topics {
		if err := alterErr(adm.AlterTopicConfigs(ctx, tops, t)); err != nil {
			return fmt.Errorf("clearing the throttled replicas of topic %s: %w", t, err)
		}
	}
	fmt.Fprintf(w, "Clearing topic-level throttles on topic %s\n", strings.Join(topics, ","))
	return nil
}

// Cancel cancels the reassignments in progress of doc's partitions, prints which, and
// clears the throttles (unless preserveThrottles). A partition without one is left alone.
func Cancel(ctx context.Context, adm *kadm.Client, doc Reassignment, preserveThrottles bool, w io.Writer) error {
	ongoing, err := listOngoing(ctx, adm, &doc)
	if err != nil {
		return fmt.Errorf("reassign: %w", err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, r := range ongoing {
		req.CancelAssign(r.Topic, r.Partition)
	}
	var ok, failed []string
	if len(ongoing) > 0 {
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return fmt.Errorf("reassign: %w", err)
		}
		for _, r := range resp.Sorted() {
			name := r.Topic + "-" + strconv.Itoa(int(r.Partition))
			if r.Err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v%s", name, r.Err, errDetail(r.ErrMessage)))
				continue
			}
			ok = append(ok, name)
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(w, "Successfully cancelled partition reassignment(s) for: %s\n", strings.Join(ok, ","))
	} else if len(failed) == 0 {
		fmt.Fprintln(w, "None of the specified partition reassignments are active.")
	}
	if len(failed) > 0 {
		return fmt.Errorf("reassign: error cancelling partition reassignment(s):\n%s", strings.Join(failed, "\n"))
	}
	if !preserveThrottles {
		if err := clearThrottles(ctx, adm, doc, w); err != nil {
			return fmt.Errorf("reassign: %w", err)
		}
	}
	return nil
}
