package main

import (
	"context"
	"flag"
	"io"
	"math"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

func init() {
	register("topics", "describe, create, alter or delete topics (kafka-topics.sh --describe / --create / --alter / --delete)", cmdTopics)
}

// cmdTopics is a small kafka-topics.sh: --describe prints the topic
// summary and one line per partition (leader, replicas, ISR, offline
// replicas); --create creates a topic; --alter raises its partition count
// and sets or deletes topic configs; --delete deletes it.
func cmdTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("topics", "topics --bootstrap ADDR (--describe [--topic T] [--under-replicated-partitions] | --create --topic T (--partitions N --replication-factor R | --replica-assignment 0:1,1:2) [--config k=v ...] | --alter --topic T [--partitions N] [--config k=v ...] [--delete-config k ...] | --delete --topic T)", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	describe := fs.Bool("describe", false, "describe topics")
	create := fs.Bool("create", false, "create a topic")
	alter := fs.Bool("alter", false, "raise a topic's partition count (--partitions) and set or delete its configs")
	del := fs.Bool("delete", false, "delete a topic")
	topic := fs.String("topic", "", "topic name (--describe: only this topic)")
	under := fs.Bool("under-replicated-partitions", false, "--describe: only partitions whose ISR is smaller than the replica set")
	partitions := fs.Int("partitions", 1, "--create: number of partitions; --alter: the new, larger partition count")
	rf := fs.Int("replication-factor", 1, "--create: replication factor")
	assignment := fs.String("replica-assignment", "", "--create: manual replica assignment, partitions separated by ',' and each partition's brokers by ':' (preferred leader first), e.g. 0:1,1:2,2:0; instead of --partitions and --replication-factor")
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
		if *assignment != "" {
			if err := onlyWith(fs, "--create without --replica-assignment", "partitions", "replication-factor"); err != nil {
				return err
			}
		}
	case *alter:
		if err := onlyWith(fs, "--create", "replication-factor", "replica-assignment"); err != nil {
			return err
		}
	default:
		if err := onlyWith(fs, "--create or --alter", "partitions", "replication-factor", "replica-assignment", "config", "delete-config"); err != nil {
			return err
		}
	}
	var replicas [][]int32
	if *assignment != "" {
		var err error
		if replicas, err = kafkatool.ParseReplicaAssignment(*assignment); err != nil {
			return usagef("topics: --replica-assignment %q: %v", *assignment, err)
		}
	}
	if *topic != "" {
		if err := checkTopicName("topics", *topic); err != nil {
			return err
		}
	}
	adm, err := newAdmin(ctx, "topics", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch {
	case *del:
		return kafkatool.DeleteTopic(ctx, adm, *topic, stdout)
	case *alter:
		n := 0 // unchanged
		if partitionsSet {
			n = *partitions
		}
		return kafkatool.AlterTopic(ctx, adm, *topic, n, cfgs, delConfigs, stdout)
	case *create:
		if *topic == "" {
			return usagef("topics: --create needs --topic")
		}
		if replicas != nil {
			cl, err := newClient("topics", *bootstrap)
			if err != nil {
				return err
			}
			defer cl.Close()
			return kafkatool.CreateTopicAssigned(ctx, cl, *topic, replicas, cfgs, stdout)
		}
		if *partitions < 1 || *partitions > math.MaxInt32 || *rf < 1 || *rf > math.MaxInt16 {
			return usagef("topics: --partitions %d / --replication-factor %d: want 1..%d / 1..%d", *partitions, *rf, math.MaxInt32, math.MaxInt16)
		}
		return kafkatool.CreateTopic(ctx, adm, *topic, int32(*partitions), int16(*rf), cfgs, stdout)
	}
	return kafkatool.DescribeTopics(ctx, adm, *topic, *under, stdout, stderr)
}
