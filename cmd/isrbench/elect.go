package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func init() {
	register("elect", "elect partition leaders, preferred or unclean (kafka-leader-election.sh)", cmdElect)
}

// cmdElect is kafka-leader-election.sh for one partition or every partition of a topic:
// --election-type preferred elects the preferred replica where it is in sync; unclean elects
// a leader for a partition that has none, from outside the ISR if no ISR member is alive
// (it loses the acknowledged records above the new leader's log end: `isrbench topics
// --describe` shows how many each replica lost). Each partition's outcome is printed; exit 1
// when any failed.
func cmdElect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("elect", "elect --bootstrap ADDR --election-type preferred|unclean --topic T [--partition P]", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	typ := fs.String("election-type", "", "preferred | unclean")
	topic := fs.String("topic", "", "topic")
	partition := fs.Int("partition", -1, "partition (default: every partition of --topic)")
	timeout := fs.Duration("timeout", 30*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("elect: unexpected arguments %q", fs.Args())
	}
	var how kadm.ElectLeadersHow
	switch *typ {
	case "preferred", "PREFERRED":
		how = kadm.ElectPreferredReplica
	case "unclean", "UNCLEAN":
		how = kadm.ElectLiveReplica
	default:
		return usagef("elect: --election-type %q: want preferred or unclean", *typ)
	}
	if *topic == "" {
		return usagef("elect: --topic is required")
	}
	if err := checkTopicName("elect", *topic); err != nil {
		return err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "partition" })
	if given && (*partition < 0 || *partition > 1<<31-1) {
		return usagef("elect: --partition %d: want a partition number >= 0", *partition)
	}
	if err := checkTimeout("elect", *timeout); err != nil {
		return err
	}
	adm, err := newAdmin(ctx, "elect", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	adm.SetTimeoutMillis(int32(min(*timeout, time.Hour) / time.Millisecond))
	ctx, cancel := context.WithTimeout(ctx, *timeout+5*time.Second)
	defer cancel()
	set := kadm.TopicsSet{}
	if given {
		set.Add(*topic, int32(*partition))
	} else {
		md, err := adm.Metadata(ctx, *topic)
		if err != nil {
			return fmt.Errorf("elect: metadata: %w", err)
		}
		td, ok := md.Topics[*topic]
		if !ok || td.Err != nil {
			return fmt.Errorf("elect: topic %s: %v", *topic, td.Err)
		}
		for p := range td.Partitions {
			set.Add(*topic, p)
		}
	}
	res, err := adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return fmt.Errorf("elect: %w", err)
	}
	var failed int
	for _, ps := range res {
		parts := make([]int32, 0, len(ps))
		for p := range ps {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			r := ps[p]
			switch {
			case r.Err == nil:
				fmt.Fprintf(stdout, "Successfully completed leader election (%s) for partition %s-%d\n", *typ, r.Topic, p)
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				fmt.Fprintf(stdout, "Valid replica already elected for partition %s-%d\n", r.Topic, p)
			default:
				failed++
				fmt.Fprintf(stdout, "Error completing leader election (%s) for partition %s-%d: %v%s\n", *typ, r.Topic, p, r.Err, errDetailOf(r.ErrMessage))
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("elect: %d elections failed", failed)
	}
	return nil
}

func errDetailOf(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
