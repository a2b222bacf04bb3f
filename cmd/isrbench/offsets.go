package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	register("offsets", "print each partition's earliest and latest (HW) offsets (GetOffsetShell)", cmdOffsets)
}

// cmdOffsets prints, per partition, the log start offset (earliest,
// inclusive) and the high watermark (latest, exclusive), like
// kafka-get-offsets.sh / GetOffsetShell: "topic:partition:earliest:latest".
func cmdOffsets(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("offsets", "offsets --bootstrap ADDR --topic T", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	topic := fs.String("topic", "", "topic (required)")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("offsets: unexpected arguments %q", fs.Args())
	}
	if *topic == "" {
		return usagef("offsets: --topic is required")
	}
	if err := checkTopicName("offsets", *topic); err != nil {
		return err
	}
	if err := checkTimeout("offsets", *timeout); err != nil {
		return err
	}
	adm, err := newAdmin(ctx, "offsets", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start, err := adm.ListStartOffsets(ctx, *topic)
	if err != nil {
		return fmt.Errorf("offsets: list earliest: %w", err)
	}
	end, err := adm.ListEndOffsets(ctx, *topic)
	if err != nil {
		return fmt.Errorf("offsets: list latest: %w", err)
	}
	if err := start.Error(); err != nil {
		return fmt.Errorf("offsets: topic %s: %w", *topic, err)
	}
	fmt.Fprintln(stdout, "# topic:partition:earliest:latest(HW)")
	var ferr error
	var all []kadm.ListedOffset
	start.Each(func(o kadm.ListedOffset) { all = append(all, o) })
	if len(all) == 0 {
		return fmt.Errorf("offsets: topic %s has no partitions (unknown topic?)", *topic)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Partition < all[j].Partition })
	for _, o := range all {
		e, ok := end.Lookup(o.Topic, o.Partition)
		if !ok || e.Err != nil {
			if ferr == nil {
				if !ok {
					ferr = fmt.Errorf("offsets: %s-%d latest: no answer for the partition", o.Topic, o.Partition)
				} else {
					ferr = fmt.Errorf("offsets: %s-%d latest: %w", o.Topic, o.Partition, e.Err)
				}
			}
			continue
		}
		if o.Err != nil {
			if ferr == nil {
				ferr = fmt.Errorf("offsets: %s-%d earliest: %w", o.Topic, o.Partition, o.Err)
			}
			continue
		}
		fmt.Fprintf(stdout, "%s:%d:%d:%d\n", o.Topic, o.Partition, o.Offset, e.Offset)
	}
	return ferr
}
