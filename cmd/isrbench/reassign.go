package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

func init() {
	register("reassign", "move partitions between brokers (kafka-reassign-partitions.sh --generate / --execute / --verify / --cancel / --list)", cmdReassign)
}

// cmdReassign is kafka-reassign-partitions.sh: --generate proposes a reassignment of the
// topics of --topics-to-move-json-file onto --broker-list; --execute starts the one of
// --reassignment-json-file (--throttle B/s limits the catch-up traffic of the moving
// replicas; --additional adds to reassignments in progress); --verify reports each
// partition and, once all completed, removes the throttle (exit 1 while any is not
// complete); --cancel cancels them; --list lists the reassignments in progress.
func cmdReassign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reassign", "reassign --bootstrap ADDR (--generate --topics-to-move-json-file F --broker-list 1,2,3 | --execute --reassignment-json-file F [--throttle B/s] [--additional] | --verify --reassignment-json-file F [--preserve-throttles] | --cancel --reassignment-json-file F [--preserve-throttles] | --list)", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	fs.StringVar(bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (Kafka's name)")
	commandConfig := addCommandConfig(fs)
	generate := fs.Bool("generate", false, "propose a reassignment of --topics-to-move-json-file's topics onto --broker-list")
	execute := fs.Bool("execute", false, "start the reassignment of --reassignment-json-file")
	verify := fs.Bool("verify", false, "report the reassignment of --reassignment-json-file; remove the throttle once complete (exit 1 while not complete)")
	cancel := fs.Bool("cancel", false, "cancel the reassignments in progress of --reassignment-json-file's partitions")
	list := fs.Bool("list", false, "list the reassignments in progress")
	topicsFile := fs.String("topics-to-move-json-file", "", `--generate: {"version":1,"topics":[{"topic":"foo"}]}`)
	brokerList := fs.String("broker-list", "", "--generate: the brokers to place the replicas on, e.g. 1,2,3")
	reassignFile := fs.String("reassignment-json-file", "", `--execute, --verify, --cancel: {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3]}]}`)
	throttle := fs.Int64("throttle", -1, "--execute: leader and follower replication throttle of the moving replicas, bytes/s (-1: none)")
	additional := fs.Bool("additional", false, "--execute: start it even though other reassignments are in progress")
	preserve := fs.Bool("preserve-throttles", false, "--verify, --cancel: leave the throttle configs in place")
	timeout := fs.Duration("timeout", 30*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("reassign: unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, m := range []bool{*generate, *execute, *verify, *cancel, *list} {
		if m {
			modes++
		}
	}
	if modes != 1 {
		return usagef("reassign: exactly one of --generate, --execute, --verify, --cancel or --list is required")
	}
	if err := checkTimeout("reassign", *timeout); err != nil {
		return err
	}
	if !*generate {
		if err := onlyWith(fs, "--generate", "topics-to-move-json-file", "broker-list"); err != nil {
			return err
		}
	}
	if !*execute {
		if err := onlyWith(fs, "--execute", "throttle", "additional"); err != nil {
			return err
		}
	}
	if !*verify && !*cancel {
		if err := onlyWith(fs, "--verify or --cancel", "preserve-throttles"); err != nil {
			return err
		}
	}
	if *generate || *list {
		if err := onlyWith(fs, "--execute, --verify or --cancel", "reassignment-json-file"); err != nil {
			return err
		}
	}
	if *execute && *throttle != -1 && *throttle < 1 {
		return usagef("reassign: --throttle %d: want a rate in bytes/s >= 1 (or -1 for none)", *throttle)
	}
	var topics []string
	var brokers []int32
	var doc kafkatool.Reassignment
	switch {
	case *generate:
		if *topicsFile == "" || *brokerList == "" {
			return usagef("reassign: --generate needs --topics-to-move-json-file and --broker-list")
		}
		data, err := os.ReadFile(*topicsFile)
		if err != nil {
			return usagef("reassign: --topics-to-move-json-file: %v", err)
		}
		if topics, err = kafkatool.ParseTopicsToMove(data); err != nil {
			return usagef("reassign: %s: %v", *topicsFile, err)
		}
		for _, s := range strings.Split(*brokerList, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || n < 0 {
				return usagef("reassign: --broker-list %q: want broker ids >= 0 separated by commas", *brokerList)
			}
			for _, b := range brokers {
				if b == int32(n) {
					return usagef("reassign: --broker-list %q names broker %d twice", *brokerList, n)
				}
			}
			brokers = append(brokers, int32(n))
		}
	case *execute, *verify, *cancel:
		if *reassignFile == "" {
			return usagef("reassign: --execute, --verify and --cancel need --reassignment-json-file")
		}
		data, err := os.ReadFile(*reassignFile)
		if err != nil {
			return usagef("reassign: --reassignment-json-file: %v", err)
		}
		if doc, err = kafkatool.ParseReassignment(data); err != nil {
			return usagef("reassign: %s: %v", *reassignFile, err)
		}
		for _, p := range doc.Partitions {
			if err := checkTopicName("reassign", p.Topic); err != nil {
				return err
			}
		}
	}
	adm, err := newAdmin(ctx, "reassign", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, stop := context.WithTimeout(ctx, *timeout)
	defer stop()
	switch {
	case *generate:
		return kafkatool.Generate(ctx, adm, topics, brokers, stdout)
	case *execute:
		return kafkatool.Execute(ctx, adm, doc, *throttle, *additional, stdout)
	case *verify:
		err := kafkatool.Verify(ctx, adm, doc, *preserve, stdout)
		if errors.Is(err, kafkatool.ErrIncomplete) {
			return &exitError{code: 1}
		}
		return err
	case *cancel:
		return kafkatool.Cancel(ctx, adm, doc, *preserve, stdout)
	}
	return kafkatool.List(ctx, adm, stdout)
}
