package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
)

// TestTopicsAndConfigsCommands drives isrbench topics and configs against an embedded
// cluster: create, raise the partition count, set and delete topic configs, change a dynamic
// broker config, describe, delete.
func TestTopicsAndConfigsCommands(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logf = func(string, ...any) {}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	boot := c.Bootstrap()
	cmd := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append(args[:1:1], append([]string{"--bootstrap", boot}, args[1:]...)...), &out, &errb); err != nil {
			t.Fatalf("isrbench %s: %v (stderr %q)", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	cmd("topics", "--create", "--topic", "ct", "--partitions", "2", "--replication-factor", "3")
	if out := cmd("topics", "--alter", "--topic", "ct", "--partitions", "4", "--config", "retention.ms=1000", "--config", "min.insync.replicas=2"); !strings.Contains(out, "now has 4 partitions") || !strings.Contains(out, "Completed updating config for topic ct") {
		t.Errorf("topics --alter printed %q", out)
	}
	if ps, _ := c.Controller().Partitions("ct"); len(ps) != 4 {
		t.Errorf("ct has %d partitions, want 4", len(ps))
	}
	cmd("topics", "--alter", "--topic", "ct", "--delete-config", "min.insync.replicas")
	if got := c.Controller().TopicConfig("ct"); len(got) != 1 || got["retention.ms"] != "1000" {
		t.Errorf("ct configs %v, want retention.ms=1000 only", got)
	}
	if out := cmd("topics", "--describe", "--topic", "ct"); !strings.Contains(out, "PartitionCount: 4\tReplicationFactor: 3\tConfigs: retention.ms=1000") {
		t.Errorf("topics --describe printed %q", out)
	}
	const wantTopic = "Dynamic configs for topic ct are:\n" +
		"  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.ms=604800000}\n"
	if out := cmd("configs", "--entity-type", "topics", "--entity-name", "ct", "--describe"); out != wantTopic {
		t.Errorf("configs --describe printed\n%s\nwant\n%s", out, wantTopic)
	}
	cmd("configs", "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "num.replica.fetchers=2,log.cleanup.policy=[delete]")
	const wantDefault = "Dynamic configs for the cluster-wide broker default are:\n" +
		"  log.cleanup.policy=delete sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleanup.policy=delete}\n" +
		"  num.replica.fetchers=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.replica.fetchers=2}\n"
	if out := cmd("configs", "--entity-type", "brokers", "--entity-default", "--describe"); out != wantDefault {
		t.Errorf("configs --describe of the default printed\n%s\nwant\n%s", out, wantDefault)
	}
	for _, id := range c.BrokerIDs() {
		if n := c.Broker(id).NumReplicaFetchers(); n != 2 {
			t.Errorf("broker %d runs %d fetchers per source, want 2", id, n)
		}
	}
	if out := cmd("configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"); !strings.Contains(out, "  num.replica.fetchers=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.replica.fetchers=2, DEFAULT_CONFIG:num.replica.fetchers=1}\n") ||
		!strings.Contains(out, "  broker.id=1 ") {
		t.Errorf("configs --describe --all of broker 1 printed %q", out)
	}
	var out, errb bytes.Buffer
	err = run(ctx, []string{"configs", "--bootstrap", boot, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "replica.lag.time.max.ms=100"}, &out, &errb)
	if code := exitCode(err, &errb); code != 1 || !strings.Contains(errb.String(), "cannot update these configs dynamically: [replica.lag.time.max.ms]") {
		t.Errorf("altering a read-only config: exit %d, stderr %q", code, errb.String())
	}
	if out := cmd("topics", "--delete", "--topic", "ct"); out != "Deleted topic ct.\n" {
		t.Errorf("topics --delete printed %q", out)
	}
	if _, ok := c.Controller().Partitions("ct"); ok {
		t.Error("ct still exists after topics --delete")
	}
}
