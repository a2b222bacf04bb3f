package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	register("topics", "describe, create, alter or delete topics (kafka-topics.sh --describe / --create / --alter / --delete)", cmdTopics)
}

// cmdTopics is a small kafka-topics.sh: --describe prints the topic
// summary and one line per partition (leader, replicas, ISR, offline
// replicas); --create creates a topic; --alter raises its partition count
// and sets or deletes topic configs; --delete deletes it.
func cmdTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topics", "topics --bootstrap ADDR (--describe [--topic T] [--under-replicated-partitions] | --create --topic T --partitions N --replication-factor R [--config k=v ...] | --alter --topic T [--partitions N] [--config k=v ...] [--delete-config k ...] | --delete --topic T)", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	describe := fs.Bool("describe", false, "describe topics")
	create := fs.Bool("create", false, "create a topic")
	alter := fs.Bool("alter", false, "raise a topic's partition count (--partitions) and set or delete its configs")
	del := fs.Bool("delete", false, "delete a topic")
	topic := fs.String("topic", "", "topic name (--describe: only this topic)")
	under := fs.Bool("under-replicated-partitions", false, "--describe: only partitions whose ISR is smaller than the replica set")
	partitions := fs.Int("partitions", 1, "--create: number of partitions; --alter: the new, larger partition count")
	rf := fs.Int("replication-factor", 1, "--create: replication factor")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	var configs, delConfigs multiFlag
	fs.Var(&configs, "config", "--create, --alter: topic config key=value (repeatable)")
	fs.Var(&delConfigs, "delete-config", "--alter: topic config to remove, back to its default (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("topics: unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, m := range []bool{*describe, *create, *alter, *del} {
		if m {
			modes++
		}
	}
	if modes != 1 {
		return usagef("topics: exactly one of --describe, --create, --alter or --delete is required")
	}
	if (*alter || *del) && *topic == "" {
		return usagef("topics: --alter and --delete need --topic")
	}
	partitionsSet := false
	fs.Visit(func(f *flag.Flag) { partitionsSet = partitionsSet || f.Name == "partitions" })
	if *alter && !partitionsSet && len(configs) == 0 && len(delConfigs) == 0 {
		return usagef("topics: --alter needs --partitions N, --config k=v or --delete-config k")
	}
	if *alter && partitionsSet && (*partitions < 1 || *partitions > math.MaxInt32) {
		return usagef("topics: --partitions %d: want 1..%d", *partitions, math.MaxInt32)
	}
	cfgs := map[string]*string{}
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("topics: --config %q: want key=value", kv)
		}
		cfgs[k] = &v
	}
	if err := checkTimeout("topics", *timeout); err != nil {
		return err
	}
	if !*describe {
		if err := onlyWith(fs, "--describe", "under-replicated-partitions"); err != nil {
			return err
		}
	}
	switch {
	case *create:
		if *topic == "" {
			return usagef("topics: --create needs --topic")
		}
		if err := onlyWith(fs, "--alter", "delete-config"); err != nil {
			return err
		}
	case *alter:
		if err := onlyWith(fs, "--create", "replication-factor"); err != nil {
			return err
		}
	default:
		if err := onlyWith(fs, "--create or --alter", "partitions", "replication-factor", "config", "delete-config"); err != nil {
			return err
		}
	}
	if *topic != "" {
		if err := checkTopicName("topics", *topic); err != nil {
			return err
		}
	}
	adm, err := newAdmin("topics", *bootstrap)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch {
	case *del:
		if resp, err := adm.DeleteTopic(ctx, *topic); err != nil {
			return fmt.Errorf("topics: delete %s: %w%s", *topic, err, errDetail(resp.ErrMessage))
		}
		fmt.Fprintf(stdout, "Deleted topic %s.\n", *topic)
		return nil
	case *alter:
		if partitionsSet {
			rs, err := adm.UpdatePartitions(ctx, *partitions, *topic)
			if err == nil {
				err = rs[*topic].Err
			}
			if err != nil {
				return fmt.Errorf("topics: alter %s --partitions %d: %w%s", *topic, *partitions, err, errDetail(rs[*topic].ErrMessage))
			}
			fmt.Fprintf(stdout, "Topic %s now has %d partitions.\n", *topic, *partitions)
		}
		if len(cfgs) > 0 || len(delConfigs) > 0 {
			var ops []kadm.AlterConfig
			for _, k := range slices.Sorted(maps.Keys(cfgs)) {
				ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: cfgs[k]})
			}
			for _, k := range delConfigs {
				ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			if err := alterConfigs(adm.AlterTopicConfigs(ctx, ops, *topic)); err != nil {
				return fmt.Errorf("topics: alter %s configs: %w", *topic, err)
			}
			fmt.Fprintf(stdout, "Completed updating config for topic %s.\n", *topic)
		}
		return nil
	}
	if *create {
		if *topic == "" {
			return usagef("topics: --create needs --topic")
		}
		if *partitions < 1 || *partitions > math.MaxInt32 || *rf < 1 || *rf > math.MaxInt16 {
			return usagef("topics: --partitions %d / --replication-factor %d: want 1..%d / 1..%d", *partitions, *rf, math.MaxInt32, math.MaxInt16)
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*rf), cfgs, *topic)
		if err != nil {
			return fmt.Errorf("topics: create %s: %w%s", *topic, err, errDetail(resp.ErrMessage))
		}
		fmt.Fprintf(stdout, "Created topic %s.\n", *topic)
		return nil
	}
	var names []string
	if *topic != "" {
		names = []string{*topic}
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
		if !*under {
			rfN := 0
			if len(parts) > 0 {
				rfN = len(parts[0].Replicas)
			}
			fmt.Fprintf(stdout, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n", name, len(parts), rfN, topicConfigs[name])
		}
		for _, p := range parts {
			if *under && len(p.ISR) >= len(p.Replicas) {
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
		}
	}
	return firstErr
}

// errDetail is ": msg" for a broker's error message, "" for none.
func errDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// alterConfigs returns the first error of an alter configs call (with the broker's message).
func alterConfigs(rs kadm.AlterConfigsResponses, err error) error {
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
