package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestElectAndTheWayOut: every broker loses its page cache at once, so every replica of the
// partition lost the acknowledged records: topics --describe shows the partition offline,
// what each replica lost and the command that brings it back, which elect runs.
func TestElectAndTheWayOut(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Controller.BrokerSessionTimeoutMs = 60000
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	boot := c.Bootstrap()
	cmd := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append(args[:1:1], append([]string{"--bootstrap", boot}, args[1:]...)...), &out, &errb)
		return out.String() + errb.String(), err
	}
	if out, err := cmd("elect", "--election-type", "sideways", "--topic", "x"); exitCode(err, &bytes.Buffer{}) != 2 || !strings.Contains(err.Error(), "preferred or unclean") {
		t.Errorf("a bad --election-type: %v %q", err, out)
	}
	if err := c.CreateTopic("gone", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, "gone", "v", 200)
	cl.Close()
	clustertest.WaitReplicasHW(t, c, "gone", 0, int64(len(acks)))
	for _, id := range c.BrokerIDs() {
		if err := c.Broker(id).WriteHWCheckpoint(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.BrokerIDs() {
		if err := c.CrashBrokerAwaitSession(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.BrokerIDs() {
		if err := c.RestartBroker(id); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd("topics", "--describe", "--topic", "gone")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Leader: none", "lost 200 acknowledged records", "isrbench elect --election-type unclean --topic gone --partition 0", "kafka-leader-election.sh --election-type unclean"} {
		if !strings.Contains(out, want) {
			t.Errorf("topics --describe lacks %q:\n%s", want, out)
		}
	}
	if out, err := cmd("elect", "--election-type", "unclean", "--topic", "gone", "--partition", "0"); err != nil || !strings.Contains(out, "Successfully completed leader election (unclean) for partition gone-0") {
		t.Fatalf("elect unclean: %v %q", err, out)
	}
	if out, err := cmd("elect", "--election-type", "preferred", "--topic", "gone"); err != nil && !strings.Contains(out, "gone-0") {
		t.Fatalf("elect preferred: %v %q", err, out)
	}
	if out, _ := cmd("topics", "--describe", "--topic", "gone"); strings.Contains(out, "Leader: none") || strings.Contains(out, "Way out") {
		t.Errorf("after the unclean election:\n%s", out)
	}
}
