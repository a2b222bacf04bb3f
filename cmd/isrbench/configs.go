package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() {
	register("configs", "describe or alter topic and broker configs (kafka-configs.sh --describe / --alter)", cmdConfigs)
}

// cmdConfigs is a small kafka-configs.sh for topics and brokers: --describe prints the
// dynamic configs of an entity (--all: every config, with its source and synonyms);
// --alter sets (--add-config) and removes (--delete-config) topic configs, or the dynamic
// broker configs of one broker (--entity-name ID) or of the cluster-wide default
// (--entity-default).
func cmdConfigs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("configs", "configs --bootstrap ADDR [--command-config FILE] --entity-type topics|brokers|users (--entity-name NAME | --entity-default) (--describe [--all] | --alter [--add-config k=v,k2=[a,b]] [--delete-config k,k2])\n  users: --alter --entity-name USER --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]' --delete-config SCRAM-SHA-512", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	entityType := fs.String("entity-type", "", "topics, brokers or users (SCRAM credentials)")
	entityName := fs.String("entity-name", "", "the topic name, the broker id, or the user")
	entityDefault := fs.Bool("entity-default", false, "brokers: the cluster-wide default (dynamic configs of every broker)")
	describe := fs.Bool("describe", false, "print the entity's dynamic configs")
	all := fs.Bool("all", false, "--describe: every config with its source and synonyms")
	alter := fs.Bool("alter", false, "change configs")
	addConfig := fs.String("add-config", "", "--alter: configs to set, k=v comma-separated; a list value in brackets: k=[a,b]")
	deleteConfig := fs.String("delete-config", "", "--alter: configs to remove, comma-separated")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("configs: unexpected arguments %q", fs.Args())
	}
	if *describe == *alter {
		return usagef("configs: exactly one of --describe or --alter is required")
	}
	e := kafkatool.Entity{Name: *entityName}
	if *entityType == "users" {
		return cmdConfigsUsers(ctx, *bootstrap, *commandConfig, *entityName, *entityDefault, *alter, *all, *addConfig, *deleteConfig, *timeout, stdout, stderr)
	}
	switch *entityType {
	case "topics":
		if *entityName == "" || *entityDefault {
			return usagef("configs: --entity-type topics needs --entity-name TOPIC (no --entity-default)")
		}
		e.Topic = *entityName
	case "brokers":
		if (*entityName == "") == !*entityDefault {
			return usagef("configs: --entity-type brokers needs exactly one of --entity-name ID or --entity-default")
		}
		if *entityName != "" {
			n, err := strconv.ParseInt(*entityName, 10, 32)
			if err != nil || n < 0 {
				return usagef("configs: --entity-name %q: a broker id is an integer >= 0", *entityName)
			}
			e.BrokerID = int32(n)
		}
		e.Default = *entityDefault
	default:
		return usagef("configs: --entity-type %q: want topics, brokers or users", *entityType)
	}
	if *alter && *addConfig == "" && *deleteConfig == "" {
		return usagef("configs: --alter needs --add-config and/or --delete-config")
	}
	ops, err := configOps(*addConfig, *deleteConfig)
	if err != nil {
		return err
	}
	adm, err := newAdmin(ctx, "configs", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *alter {
		return kafkatool.AlterConfigs(ctx, adm, e, ops, stdout)
	}
	return kafkatool.DescribeConfigs(ctx, adm, e, *all, stdout)
}

// configOps parses kafka-configs' --add-config ("k=v,k2=[a,b]") and --delete-config
// ("k,k2") into incremental operations.
func configOps(add, del string) ([]kadm.AlterConfig, error) {
	var ops []kadm.AlterConfig
	for _, kv := range kafkatool.SplitConfigs(add) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("configs: --add-config %q: want key=value", kv)
		}
		v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: strings.TrimSpace(k), Value: &v})
	}
	for _, k := range kafkatool.SplitConfigs(del) {
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: strings.TrimSpace(k)})
	}
	return ops, nil
}

// cmdConfigsUsers is kafka-configs.sh for --entity-type users: SCRAM credentials
// (AlterUserScramCredentials, DescribeUserScramCredentials). The password of --add-config is
// sent salted and hashed (kadm computes the SCRAM keys), and never printed.
func cmdConfigsUsers(ctx context.Context, bootstrap, commandConfig, user string, def, alter, all bool, add, del string, timeout time.Duration, stdout, stderr io.Writer) error {
	switch {
	case def:
		return usagef("configs: --entity-type users takes --entity-name USER (SCRAM credentials have no --entity-default)")
	case all:
		return usagef("configs: --all applies to topics and brokers")
	case alter && user == "":
		return usagef("configs: --alter --entity-type users needs --entity-name USER")
	case alter && add == "" && del == "":
		return usagef("configs: --alter needs --add-config and/or --delete-config")
	}
	ups, dels, err := kafkatool.ParseSCRAMConfigs(user, add, del)
	if err != nil {
		return usagef("configs: %v", err)
	}
	adm, err := newAdmin(ctx, "configs", bootstrap, commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if alter {
		return kafkatool.AlterUserSCRAM(ctx, adm, user, ups, dels, stdout)
	}
	return kafkatool.DescribeUserSCRAM(ctx, adm, user, stdout)
}
