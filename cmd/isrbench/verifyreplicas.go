package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/internal/replicaverify"
)

func init() {
	register("verify-replicas", "compare every replica's log batch by batch up to its HW (kafka.tools.ReplicaVerificationTool)", cmdVerifyReplicas)
}

// cmdVerifyReplicas is Kafka's ReplicaVerificationTool as one pass: every replica of the
// selected partitions is fetched with the debugging replica id -2 and compared with the
// leader's log up to its HW (internal/replicaverify). It prints each replica's log start, HW,
// LEO and lag, and per partition the range verified or the first divergence. Exit 1 on a
// divergence or a replica it could not read, 0 when every replica was verified.
func cmdVerifyReplicas(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify-replicas", "verify-replicas --bootstrap ADDR [--topic T | --topics-include REGEX] [--partitions 0,1] [--time -2|MS]", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	fs.StringVar(bootstrap, "broker-list", "127.0.0.1:9092", "the same as --bootstrap (ReplicaVerificationTool's name)")
	fs.StringVar(bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap")
	commandConfig := addCommandConfig(fs)
	topic := fs.String("topic", "", "verify this topic only (exact name)")
	include := fs.String("topics-include", "", "verify the topics matching this regular expression (default: every topic, internal ones included)")
	fs.StringVar(include, "topic-white-list", "", "the same as --topics-include (the tool's older name)")
	partitions := fs.String("partitions", "", "verify these partitions only, comma-separated (default: all)")
	at := fs.Int64("time", -2, "where to start: -2 = the earliest offset every replica still holds, or a timestamp in ms (the leader's first offset at or after it)")
	fetchSize := fs.Int("fetch-size", 1<<20, "the most record bytes one fetch asks for (bytes)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up a pass after this long")
	interval := fs.Int64("report-interval-ms", 0, "repeat: verify again every this many ms, each pass from where the last one ended, printing the max lag line (0 = one pass)")
	duration := fs.Duration("duration", 0, "with --report-interval-ms: stop after this long (0 = until interrupted)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("verify-replicas: unexpected arguments %q", fs.Args())
	}
	if err := checkTimeout("verify-replicas", *timeout); err != nil {
		return err
	}
	o := replicaverify.Options{Time: *at, FetchBytes: int32(min(*fetchSize, 1<<30))}
	switch {
	case *topic != "" && *include != "":
		return usagef("verify-replicas: give either --topic or --topics-include, not both")
	case *topic != "":
		if err := checkTopicName("verify-replicas", *topic); err != nil {
			return err
		}
		o.Topics = regexp.MustCompile("^" + regexp.QuoteMeta(*topic) + "$")
	case *include != "":
		re, err := regexp.Compile("^(?:" + *include + ")$")
		if err != nil {
			return usagef("verify-replicas: --topics-include %q is not a regular expression: %v", *include, err)
		}
		o.Topics = re
	}
	if *partitions != "" {
		for _, f := range strings.Split(*partitions, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
			if err != nil || n < 0 {
				return usagef("verify-replicas: --partitions %q: %q is not a partition number >= 0", *partitions, f)
			}
			o.Partitions = append(o.Partitions, int32(n))
		}
	}
	if *at < -2 || *at == -1 {
		return usagef("verify-replicas: --time %d: want -2 (earliest) or a timestamp in ms >= 0 (-1, latest, leaves nothing to compare in one pass)", *at)
	}
	if *fetchSize < 1 {
		return usagef("verify-replicas: --fetch-size %d: want bytes >= 1", *fetchSize)
	}
	if *interval < 0 || (*duration != 0 && *interval == 0) || *duration < 0 {
		return usagef("verify-replicas: --report-interval-ms %d, --duration %s: want an interval >= 0 ms, and a duration >= 0 only with an interval", *interval, *duration)
	}
	cl, err := newKgoClient(ctx, "verify-replicas", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer cl.Close()
	if *interval > 0 {
		return verifyRepeatedly(ctx, cl, o, *timeout, time.Duration(*interval)*time.Millisecond, *duration, stdout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := replicaverify.Verify(ctx, cl, o)
	if rep != nil {
		if werr := rep.Write(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	return verifyVerdict(rep)
}

// verifyVerdict is exit 1 on a divergence or a replica not checked, else nil.
func verifyVerdict(rep *replicaverify.Report) error {
	div, unchecked := rep.Divergences(), rep.Unchecked()
	switch {
	case len(div) > 0:
		return &exitError{code: 1, err: fmt.Errorf("verify-replicas: %d of %d partitions diverge; first: %s", len(div), len(rep.Partitions), div[0])}
	case len(unchecked) > 0:
		return &exitError{code: 1, err: fmt.Errorf("verify-replicas: %d replicas not checked; first: %s", len(unchecked), unchecked[0])}
	}
	return nil
}

// verifyRepeatedly is ReplicaVerificationTool's running mode: a pass every interval, each
// from where the previous one verified up to, printing the tool's timestamped max lag line,
// until duration passes (0: until ctx ends, as an interrupt does; exit 0 then). A divergence
// prints the whole report and exits 1; a replica not checked is printed and checked again in
// the next pass.
func verifyRepeatedly(ctx context.Context, cl *kgo.Client, o replicaverify.Options, timeout, interval, duration time.Duration, stdout io.Writer) error {
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	o.From = map[replicaverify.TopicPartition]int64{}
	fmt.Fprintf(stdout, "%s: verification process is started.\n", toolTime(time.Now()))
	for pass := 1; ; pass++ {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		rep, err := replicaverify.Verify(pctx, cl, o)
		cancel()
		if ctx.Err() != nil {
			return nil // the duration ended or an interrupt came
		}
		if err != nil {
			return err
		}
		if len(rep.Divergences()) > 0 {
			if err := rep.Write(stdout); err != nil {
				return err
			}
			return verifyVerdict(rep)
		}
		for _, u := range rep.Unchecked() {
			fmt.Fprintf(stdout, "%s: not checked in pass %d: %s\n", toolTime(time.Now()), pass, u)
		}
		for _, p := range rep.Partitions {
			if p.Verified >= 0 {
				o.From[replicaverify.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Verified
			}
		}
		if lag, p, ok := rep.MaxLag(); ok {
			fmt.Fprintf(stdout, "%s: max lag is %d for partition %s-%d at offset %d among %d partitions\n", toolTime(time.Now()), lag, p.Topic, p.Partition, p.Verified, len(rep.Partitions))
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// toolTime formats t as ReplicaVerificationTool does (yyyy-MM-dd HH:mm:ss,SSS).
func toolTime(t time.Time) string { return t.Format("2006-01-02 15:04:05,000") }
