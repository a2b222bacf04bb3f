package kafkatool

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopic deletes topic and says so on w.
func DeleteTopic(ctx context.Context, adm *kadm.Client, topic string, w io.Writer) error {
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil {
		return fmt.Errorf("topics: delete %s: %w%s", topic, err, errDetail(resp.ErrMessage))
	}
	fmt.Fprintf(w, "Deleted topic %s.\n", topic)
	return nil
}

// CreateTopic creates topic with the given partitions, replication factor and topic
// configs, and says so on w.
func CreateTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string, w io.Writer) error {
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err != nil {
		return fmt.Errorf("topics: create %s: %w%s", topic, err, errDetail(resp.ErrMessage))
	}
	fmt.Fprintf(w, "Created topic %s.\n", topic)
	return nil
}

// AlterTopic raises topic's partition count to partitions (0 leaves it), then sets the
// configs of set (in name order) and deletes those of del, saying each on w.
func AlterTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int, set map[string]*string, del []string, w io.Writer) error {
	if partitions > 0 {
		rs, err := adm.UpdatePartitions(ctx, partitions, topic)
		if err == nil {
			err = rs[topic].Err
		}
		if err != nil {
			return fmt.Errorf("topics: alter %s --partitions %d: %w%s", topic, partitions, err, errDetail(rs[topic].ErrMessage))
		}
		fmt.Fprintf(w, "Topic %s now has %d partitions.\n", topic, partitions)
	}
	if len(set) > 0 || len(del) > 0 {
		var ops []kadm.AlterConfig
		for _, k := range slices.Sorted(maps.Keys(set)) {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
		}
		for _, k := range del {
			ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		if err := alterErr(adm.AlterTopicConfigs(ctx, ops, topic)); err != nil {
			return fmt.Errorf("topics: alter %s configs: %w", topic, err)
		}
		fmt.Fprintf(w, "Completed updating config for topic %s.\n", topic)
	}
	return nil
}

// DescribeTopics prints topic (every topic when "") as kafka-topics.sh --describe does: a
// summary line with the topic id (Kafka's Uuid form: URL-safe base64 without padding) and the
// dynamic topic configs, then one line per partition (leader,
// replicas, ISR, offline replicas); underOnly prints only the partitions whose ISR is
// smaller than the replica set, without the summary. A topic the brokers answer with an
// error is reported on stderr and makes the first such error the result.
func DescribeTopics(ctx context.Context, adm *kadm.Client, topic string, underOnly bool, stdout, stderr io.Writer) error {
	var names []string
	if topic != "" {
		names = []string{topic}
	}
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return fmt.Errorf("topics: metadata: %w", err)
	}
	tnames := md.Topics.Names()
	sort.Strings(tnames)
	topicConfigs := map[string]string{}
	if len(tnames) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, tnames...)
		if err != nil {
			var se *kadm.ShardErrors
			if !errors.As(err, &se) {
				return fmt.Errorf("topics: describe configs: %w", err)
			}
		}
		for _, rc := range rcs {
			var kvs []string
			for _, c := range rc.Configs {
				if c.Source == 1 /* DYNAMIC_TOPIC_CONFIG */ {
					kvs = append(kvs, c.Key+"="+c.MaybeValue())
				}
			}
			sort.Strings(kvs)
			topicConfigs[rc.Name] = strings.Join(kvs, ",")
		}
	}
	var firstErr error
	for _, name := range tnames {
		td := md.Topics[name]
		if td.Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("topics: topic %s: %w", name, td.Err)
			}
			fmt.Fprintf(stderr, "Error describing topic %s: %v\n", name, td.Err)
			continue
		}
		parts := td.Partitions.Sorted()
		if !underOnly {
			rfN := 0
			if len(parts) > 0 {
				rfN = len(parts[0].Replicas)
			}
			fmt.Fprintf(stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				name, base64.RawURLEncoding.EncodeToString(td.ID[:]), len(parts), rfN, topicConfigs[name])
		}
		for _, p := range parts {
			if underOnly && len(p.ISR) >= len(p.Replicas) {
				continue
			}
			leader := fmt.Sprint(p.Leader)
			if p.Leader < 0 {
				leader = "none"
			}
			line := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", name, p.Partition, leader, joinInt32(p.Replicas), joinInt32(p.ISR))
			if len(p.OfflineReplicas) > 0 {
				line += "\tOffline: " + joinInt32(p.OfflineReplicas)
			}
			fmt.Fprintln(stdout, line)
			if p.Leader < 0 {
				describeWayOut(ctx, adm, name, p, stdout)
			}
		}
	}
	return firstErr
}

// describeWayOut explains an offline partition: how many acknowledged records each replica
// lost (DescribeLogDirs' offset lag: how far its log end lies below the HW it had
// acknowledged, as its broker knows it), and the unclean election that brings it back and
// what that loses.
func describeWayOut(ctx context.Context, adm *kadm.Client, topic string, p kadm.PartitionDetail, stdout io.Writer) {
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	var parts []string
	for _, r := range p.Replicas {
		dp, ok := kadm.DescribedLogDirPartition{}, false
		if err == nil {
			for _, d := range dirs[r] {
				if x, found := d.Topics.Lookup(topic, p.Partition); found {
					dp, ok = x, true
				}
			}
		}
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("broker %d: not reachable", r))
		case dp.OffsetLag > 0:
			parts = append(parts, fmt.Sprintf("broker %d: lost %d acknowledged records (its log ends %d below the HW it had acknowledged)", r, dp.OffsetLag, dp.OffsetLag))
		default:
			parts = append(parts, fmt.Sprintf("broker %d: no loss known (%d bytes)", r, dp.Size))
		}
	}
	fmt.Fprintf(stdout, "\t\tOffline: no replica can be elected cleanly. %s.\n", strings.Join(parts, "; "))
	fmt.Fprintf(stdout, "\t\tWay out: isrbench elect --election-type unclean --topic %s --partition %d "+
		"(kafka-leader-election.sh --election-type unclean --topic %s --partition %d) elects the first live replica; "+
		"the records acknowledged above its log end are lost and the other replicas truncate to it.\n", topic, p.Partition, topic, p.Partition)
}

// errDetail is ": msg" for a broker's error message, "" for none.
func errDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// alterErr returns the first error of an alter configs call (with the broker's message).
func alterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%w%s", r.Err, errDetail(r.ErrMessage))
		}
	}
	return nil
}

func joinInt32(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// ParseReplicaAssignment parses kafka-topics.sh's --replica-assignment: partitions separated
// by ',', each partition's broker ids by ':' in preference order ("0:1,1:2" = partition 0 on
// brokers 0 and 1, partition 1 on 1 and 2). Every partition must list as many brokers, each
// once.
func ParseReplicaAssignment(s string) ([][]int32, error) {
	var out [][]int32
	for p, part := range strings.Split(s, ",") {
		var rs []int32
		for _, b := range strings.Split(part, ":") {
			id, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
			if err != nil || id < 0 {
				return nil, fmt.Errorf("partition %d: %q is not a broker id (an integer >= 0)", p, b)
			}
			if slices.Contains(rs, int32(id)) {
				return nil, fmt.Errorf("partition %d: broker %d is listed twice", p, id)
			}
			rs = append(rs, int32(id))
		}
		if len(out) > 0 && len(rs) != len(out[0]) {
			return nil, fmt.Errorf("partition %d has %d replicas, partition 0 has %d", p, len(rs), len(out[0]))
		}
		out = append(out, rs)
	}
	return out, nil
}

// CreateTopicAssigned creates topic with partition p's replicas on replicas[p] (CreateTopics
// with a manual assignment, kafka-topics.sh --create --replica-assignment) and the topic
// configs, and says so on w.
func CreateTopicAssigned(ctx context.Context, cl kmsg.Requestor, topic string, replicas [][]int32, configs map[string]*string, w io.Writer) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range replicas {
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: rs})
	}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: configs[k]})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("topics: create %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("topics: create %s: %d topics answered", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		return fmt.Errorf("topics: create %s: %w%s", topic, err, errDetail(msg))
	}
	fmt.Fprintf(w, "Created topic %s.\n", topic)
	return nil
}
