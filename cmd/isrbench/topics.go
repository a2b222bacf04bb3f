package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	register("topics", "describe or create topics (kafka-topics.sh --describe / --create)", cmdTopics)
}

// cmdTopics is a small kafka-topics.sh: --describe prints the topic
// summary and one line per partition (leader, replicas, ISR, offline
// replicas); --create creates a topic.
func cmdTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topics", "topics --bootstrap ADDR (--describe [--topic T] [--under-replicated-partitions] | --create --topic T --partitions N --replication-factor R [--config k=v ...])", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	describe := fs.Bool("describe", false, "describe topics")
	create := fs.Bool("create", false, "create a topic")
	topic := fs.String("topic", "", "topic name (--describe: only this topic)")
	under := fs.Bool("under-replicated-partitions", false, "--describe: only partitions whose ISR is smaller than the replica set")
	partitions := fs.Int("partitions", 1, "--create: number of partitions")
	rf := fs.Int("replication-factor", 1, "--create: replication factor")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	var configs multiFlag
	fs.Var(&configs, "config", "--create: topic config key=value (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("topics: unexpected arguments %q", fs.Args())
	}
	if *describe == *create {
		return usagef("topics: exactly one of --describe or --create is required")
	}
	if err := checkTimeout("topics", *timeout); err != nil {
		return err
	}
	if *create {
		if err := onlyWith(fs, "--describe", "under-replicated-partitions"); err != nil {
			return err
		}
		if *topic == "" {
			return usagef("topics: --create needs --topic")
		}
	} else if err := onlyWith(fs, "--create", "partitions", "replication-factor", "config"); err != nil {
		return err
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
	if *create {
		if *topic == "" {
			return usagef("topics: --create needs --topic")
		}
		if *partitions < 1 || *partitions > math.MaxInt32 || *rf < 1 || *rf > math.MaxInt16 {
			return usagef("topics: --partitions %d / --replication-factor %d: want 1..%d / 1..%d", *partitions, *rf, math.MaxInt32, math.MaxInt16)
		}
		cfgs := map[string]*string{}
		for _, kv := range configs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("topics: --config %q: want key=value", kv)
			}
			cfgs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*rf), cfgs, *topic)
		if err != nil {
			msg := ""
			if resp.ErrMessage != "" {
				msg = ": " + resp.ErrMessage
			}
			return fmt.Errorf("topics: create %s: %w%s", *topic, err, msg)
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

func joinInt32(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
