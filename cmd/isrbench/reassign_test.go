package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/netfetch"
)

// TestReassignCommand drives isrbench reassign against an embedded cluster of 4 brokers as
// an operator drives kafka-reassign-partitions.sh: --generate a move of a topic onto
// brokers 1,2,3, --execute it with a throttle (the throttle configs are set), --verify until
// complete (which clears them), then a move that cannot complete (its new replica's link
// is down): --list shows it, --verify exits 1, --cancel reverts it.
func TestReassignCommand(t *testing.T) {
	c := clustertest.Start(t, 4, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	ctrl := c.Controller()
	if err := c.CreateTopic("rt", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.Produce(t, clustertest.NewClient(t, c), "rt", "v", 200)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cmdOutErr := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := exitCode(run(ctx, append([]string{"reassign", "--bootstrap", c.Bootstrap()}, args...), &out, &errb), &errb)
		if code != wantCode {
			t.Fatalf("isrbench reassign %s: exit %d, want %d\nstdout %s\nstderr %s", strings.Join(args, " "), code, wantCode, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	cmd := func(wantCode int, args ...string) string {
		t.Helper()
		out, _ := cmdOutErr(wantCode, args...)
		return out
	}
	waitDone := func(p int32) controller.PartitionState {
		t.Helper()
		return clustertest.WatchPartition(t, c, 1, "rt", p)(fmt.Sprintf("reassignment of rt-%d done", p),
			func(s controller.PartitionState) bool { return !s.Reassigning() })
	}

	out := cmd(0, "--generate", "--topics-to-move-json-file", file("topics.json", `{"version":1,"topics":[{"topic":"rt"}]}`), "--broker-list", "1,2,3")
	_, proposed, ok := strings.Cut(out, "Proposed partition reassignment configuration\n")
	if !ok || !strings.HasPrefix(out, "Current partition replica assignment\n") {
		t.Fatalf("--generate printed %q", out)
	}
	doc, err := kafkatool.ParseReassignment([]byte(proposed))
	if err != nil {
		t.Fatalf("--generate's proposal does not parse: %v\n%s", err, proposed)
	}
	want := [][]int32{{1, 2, 3}, {2, 3, 1}}
	for i, p := range doc.Partitions {
		if p.Topic != "rt" || p.Partition != int32(i) || !slices.Equal(p.Replicas, want[i]) {
			t.Fatalf("--generate proposed %+v, want %v", doc.Partitions, want)
		}
	}
	move := file("move.json", proposed)
	out = cmd(0, "--execute", "--reassignment-json-file", move, "--throttle", "50000000")
	if !strings.Contains(out, "Save this to use as the --reassignment-json-file option during rollback") ||
		!strings.Contains(out, "The inter-broker throttle limit was set to 50000000 B/s") ||
		!strings.Contains(out, "Successfully started partition reassignment(s) for rt-0,rt-1") {
		t.Fatalf("--execute printed %q", out)
	}
	if cfg := ctrl.TopicConfig("rt"); cfg[controller.ConfigLeaderThrottledReplicas] == "" {
		t.Errorf("after --execute --throttle: topic configs %v, want the throttled replicas", cfg)
	}
	if got := ctrl.BrokerConfigs("1")["leader.replication.throttled.rate"]; got != "50000000" {
		t.Errorf("after --execute --throttle: broker 1's leader.replication.throttled.rate %q", got)
	}
	for p := int32(0); p < 2; p++ {
		if st := waitDone(p); !slices.Equal(st.Replicas, want[p]) {
			t.Fatalf("rt-%d: %v, want replicas %v", p, st, want[p])
		}
	}
	out = cmd(0, "--verify", "--reassignment-json-file", move)
	if !strings.Contains(out, "Reassignment of partition rt-0 is completed.") || !strings.Contains(out, "Clearing broker-level throttles on brokers 0,1,2,3") ||
		!strings.Contains(out, "Clearing topic-level throttles on topic rt") {
		t.Fatalf("--verify printed %q", out)
	}
	if cfg := ctrl.TopicConfig("rt"); len(cfg) != 0 {
		t.Errorf("after --verify: topic configs %v, want none", cfg)
	}
	for _, b := range []string{"0", "1", "2", "3"} {
		if got := ctrl.BrokerConfigs(b); len(got) != 0 {
			t.Errorf("after --verify: broker %s configs %v, want none", b, got)
		}
	}
	clustertest.CheckReplicasIdentical(t, c, "rt", 2)

	// A move that cannot complete: broker 0's link from the leader is down.
	st, _ := ctrl.Partition("rt", 0)
	c.SetLink(st.Leader, 0, netfetch.LinkFault{Down: true})
	defer c.SetLink(st.Leader, 0, netfetch.LinkFault{})
	target := append(slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return r != st.Leader }), 0)
	stuck := file("stuck.json", kafkatool.FormatReassignment(kafkatool.Reassignment{Partitions: []kafkatool.PartitionReassignment{{Topic: "rt", Partition: 0, Replicas: target}}}))
	cmd(0, "--execute", "--reassignment-json-file", stuck)
	if _, errOut := cmdOutErr(1, "--execute", "--reassignment-json-file", move); !strings.Contains(errOut, "cannot execute because there is an existing partition reassignment (rt-0); use --additional") {
		t.Fatalf("--execute while another is in progress: stderr %q", errOut)
	}
	if out := cmd(0, "--list"); !strings.Contains(out, "Current partition reassignments:\nrt-0: replicas: ") || !strings.Contains(out, "adding: 0.") {
		t.Fatalf("--list printed %q", out)
	}
	if out := cmd(1, "--verify", "--reassignment-json-file", stuck); !strings.Contains(out, "Reassignment of partition rt-0 is still in progress.") {
		t.Fatalf("--verify of a move in progress printed %q", out)
	}
	if out := cmd(0, "--cancel", "--reassignment-json-file", stuck); !strings.Contains(out, "Successfully cancelled partition reassignment(s) for: rt-0") {
		t.Fatalf("--cancel printed %q", out)
	}
	if st := waitDone(0); !slices.Equal(st.Replicas, want[0]) {
		t.Fatalf("after --cancel: %v, want replicas %v", st, want[0])
	}
	if out := cmd(0, "--list"); out != "No partition reassignments found.\n" {
		t.Fatalf("--list printed %q", out)
	}
	if out := cmd(1, "--verify", "--reassignment-json-file", stuck); !strings.Contains(out, "There is no active reassignment of partition rt-0, but replica set is 1,2,3 rather than") {
		t.Fatalf("--verify after the cancel printed %q", out)
	}
}

// TestReassignCommandUsage: bad flags and files are usage errors (exit 2) before any
// network I/O.
func TestReassignCommandUsage(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reassign"}, "exactly one of --generate, --execute, --verify, --cancel or --list"},
		{[]string{"reassign", "--execute", "--verify", "--reassignment-json-file", good}, "exactly one of"},
		{[]string{"reassign", "--execute"}, "need --reassignment-json-file"},
		{[]string{"reassign", "--generate", "--broker-list", "1,2"}, "--generate needs --topics-to-move-json-file and --broker-list"},
		{[]string{"reassign", "--generate", "--broker-list", "1,x", "--topics-to-move-json-file", file("t.json", `{"version":1,"topics":[{"topic":"t"}]}`)}, "want broker ids >= 0"},
		{[]string{"reassign", "--generate", "--broker-list", "1,1", "--topics-to-move-json-file", file("t2.json", `{"version":1,"topics":[{"topic":"t"}]}`)}, "names broker 1 twice"},
		{[]string{"reassign", "--generate", "--broker-list", "1", "--topics-to-move-json-file", file("t3.json", `{"version":1,"topics":[]}`)}, "no topics"},
		{[]string{"reassign", "--verify", "--reassignment-json-file", good, "--throttle", "5"}, "--throttle apply only with --execute"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", good, "--throttle", "0"}, "--throttle 0: want a rate"},
		{[]string{"reassign", "--list", "--preserve-throttles"}, "--preserve-throttles apply only with --verify or --cancel"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("dup.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`)}, "given once"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("twice.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`)}, "given twice"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("empty.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`)}, "empty replica list"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("dirs.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}`)}, `only "any" is accepted`},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("v2.json", `{"version":2,"partitions":[]}`)}, "only version 1"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("junk.json", `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}],"x":1}`)}, "unknown field"},
		{[]string{"reassign", "--execute", "--reassignment-json-file", file("badtopic.json", `{"version":1,"partitions":[{"topic":"a/b","partition":0,"replicas":[1]}]}`)}, "a topic name is"},
		{[]string{"reassign", "--list", "extra"}, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errb)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want a usage error containing %q", err, tc.want)
			}
		})
	}
}
