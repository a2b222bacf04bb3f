package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

func init() {
	register("log-dirs", "describe the brokers' log directories: replica sizes and offset lag (kafka-log-dirs.sh --describe)", cmdLogDirs)
}

// cmdLogDirs is kafka-log-dirs.sh --describe: per broker (--broker-list, default every broker)
// its log directory and the replicas in it (--topic-list, default every topic) with their size
// in bytes and offset lag, as Kafka's tool prints them (two lines, then JSON).
func cmdLogDirs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("log-dirs", "log-dirs --bootstrap ADDR --describe [--topic-list T1,T2] [--broker-list 0,1]", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	describe := fs.Bool("describe", false, "describe the log directories (required)")
	topicList := fs.String("topic-list", "", "comma-separated topics to describe (default: every topic)")
	brokerList := fs.String("broker-list", "", "comma-separated broker ids to query (default: every broker)")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("log-dirs: unexpected arguments %q", fs.Args())
	}
	if !*describe {
		return usagef("log-dirs: --describe is required")
	}
	if err := checkTimeout("log-dirs", *timeout); err != nil {
		return err
	}
	var topics []string
	for _, tp := range strings.Split(*topicList, ",") {
		if tp = strings.TrimSpace(tp); tp == "" {
			continue
		}
		if err := checkTopicName("log-dirs", tp); err != nil {
			return err
		}
		topics = append(topics, tp)
	}
	var brokers []int32
	for _, b := range strings.Split(*brokerList, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		id, err := strconv.ParseInt(b, 10, 32)
		if err != nil || id < 0 {
			return usagef("log-dirs: --broker-list %q: %q is not a broker id (an integer >= 0)", *brokerList, b)
		}
		brokers = append(brokers, int32(id))
	}
	adm, err := newAdmin(ctx, "log-dirs", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return kafkatool.DescribeLogDirs(ctx, adm, brokers, topics, stdout)
}
