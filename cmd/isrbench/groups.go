package main

import (
	"context"
	"flag"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

func init() {
	register("groups", "list, describe (lag per partition), reset offsets, delete consumer groups or their offsets (kafka-consumer-groups.sh)", cmdGroups)
}

// cmdGroups is kafka-consumer-groups.sh: --list; --describe --group G (repeatable) with the
// committed offset, log end offset and lag per partition; --reset-offsets --group G
// (--topic T[:P,P] ... | --all-topics) (--to-earliest | --to-latest | --to-offset N) [--execute]
// (a dry run without --execute); --delete --group G; --delete-offsets --group G --topic T[:P].
func cmdGroups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("groups", "groups --bootstrap ADDR (--list | --describe --group G | --reset-offsets --group G (--topic T[:P,...] | --all-topics) (--to-earliest | --to-latest | --to-offset N) [--execute] | --delete --group G | --delete-offsets --group G --topic T[:P,...])", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	list := fs.Bool("list", false, "list the groups")
	describe := fs.Bool("describe", false, "describe groups: offsets and lag per partition, and their members")
	reset := fs.Bool("reset-offsets", false, "reset a group's committed offsets (the group must be inactive); a dry run without --execute")
	del := fs.Bool("delete", false, "delete groups (they must be empty)")
	delOffsets := fs.Bool("delete-offsets", false, "delete a group's committed offsets of topics (not of the topics its members subscribe to)")
	var groups, topics multiFlag
	fs.Var(&groups, "group", "group id (repeatable with --describe and --delete)")
	fs.Var(&topics, "topic", "--reset-offsets, --delete-offsets: topic, optionally with partitions T:0,1 (repeatable)")
	allTopics := fs.Bool("all-topics", false, "--reset-offsets: every topic the group has committed offsets for")
	toEarliest := fs.Bool("to-earliest", false, "--reset-offsets: to each partition's log start")
	toLatest := fs.Bool("to-latest", false, "--reset-offsets: to each partition's high watermark")
	toOffset := fs.Int64("to-offset", -1, "--reset-offsets: to this offset (bounded to each partition's log start and high watermark)")
	execute := fs.Bool("execute", false, "--reset-offsets: commit the new offsets (otherwise only print them)")
	dryRun := fs.Bool("dry-run", false, "--reset-offsets: only print the new offsets (the default)")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("groups: unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, m := range []bool{*list, *describe, *reset, *del, *delOffsets} {
		if m {
			modes++
		}
	}
	if modes != 1 {
		return usagef("groups: exactly one of --list, --describe, --reset-offsets, --delete or --delete-offsets is required")
	}
	if err := checkTimeout("groups", *timeout); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !*reset {
		if err := onlyWith(fs, "--reset-offsets", "all-topics", "to-earliest", "to-latest", "to-offset", "execute", "dry-run"); err != nil {
			return err
		}
	}
	if !*reset && !*delOffsets {
		if err := onlyWith(fs, "--reset-offsets or --delete-offsets", "topic"); err != nil {
			return err
		}
	}
	if *list {
		if err := onlyWith(fs, "--describe, --reset-offsets, --delete or --delete-offsets", "group"); err != nil {
			return err
		}
	} else if len(groups) == 0 {
		return usagef("groups: --group is required")
	}
	if (*reset || *delOffsets) && len(groups) != 1 {
		return usagef("groups: --reset-offsets and --delete-offsets take one --group")
	}
	topicParts := map[string][]int32{}
	for _, tp := range topics {
		name, parts, err := parseTopicPartitions(tp)
		if err != nil {
			return err
		}
		topicParts[name] = append(topicParts[name], parts...)
	}
	var to kafkatool.ResetTo
	if *reset {
		scenarios := 0
		for _, s := range []string{"to-earliest", "to-latest", "to-offset"} {
			if given[s] {
				scenarios++
			}
		}
		switch {
		case scenarios != 1:
			return usagef("groups: --reset-offsets needs exactly one of --to-earliest, --to-latest or --to-offset N")
		case (len(topics) == 0) == !*allTopics:
			return usagef("groups: --reset-offsets needs --topic T or --all-topics (not both)")
		case *execute && *dryRun:
			return usagef("groups: --execute and --dry-run exclude each other")
		case given["to-offset"] && *toOffset < 0:
			return usagef("groups: --to-offset %d: want an offset >= 0", *toOffset)
		}
		to = kafkatool.ResetTo{Earliest: *toEarliest, Latest: *toLatest, Offset: *toOffset}
	}
	if *delOffsets && len(topics) == 0 {
		return usagef("groups: --delete-offsets needs --topic")
	}
	adm, err := newAdmin(ctx, "groups", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch {
	case *list:
		return kafkatool.ListGroups(ctx, adm, stdout)
	case *describe:
		return kafkatool.DescribeGroups(ctx, adm, groups, stdout)
	case *del:
		return kafkatool.DeleteGroups(ctx, adm, groups, stdout)
	case *delOffsets:
		return kafkatool.DeleteOffsets(ctx, adm, groups[0], topicParts, stdout)
	}
	if *allTopics {
		committed, err := adm.FetchOffsets(ctx, groups[0])
		if err != nil {
			return err
		}
		committed.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil {
				topicParts[o.Topic] = append(topicParts[o.Topic], o.Partition)
			}
		})
		if len(topicParts) == 0 {
			return usagef("groups: --all-topics: group %s has no committed offsets", groups[0])
		}
	}
	return kafkatool.ResetOffsets(ctx, adm, groups[0], topicParts, to, *execute, stdout)
}

// parseTopicPartitions parses T or T:P,P (kafka-consumer-groups.sh's --topic).
func parseTopicPartitions(s string) (string, []int32, error) {
	name, list, hasParts := strings.Cut(s, ":")
	if err := checkTopicName("groups", name); err != nil {
		return "", nil, err
	}
	if !hasParts {
		return name, nil, nil
	}
	var parts []int32
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return "", nil, usagef("groups: --topic %q: %q is not a partition number", s, p)
		}
		parts = append(parts, int32(n))
	}
	return name, parts, nil
}
