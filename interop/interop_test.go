package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
)

// deleteTopicPending is the one switch for the suite's "delete the topic" step: while it is
// true every client reports the step as pending instead of running it. isrbench serves
// DeleteTopics, so every client runs its delete.
const deleteTopicPending = false

const deletePendingReason = "pending: DeleteTopics is not served yet"

// Operations of the client x operation table, in column order.
var operations = []string{"produce acks=all", "group consume + commit", "resume at committed", "delete records", "describe log dirs", "delete topic"}

// table collects the outcome of every (client, operation) for TestMain's summary.
var table = struct {
	sync.Mutex
	rows map[string]map[string]string
}{rows: map[string]map[string]string{}}

func record(client, op, outcome string) {
	table.Lock()
	defer table.Unlock()
	if table.rows[client] == nil {
		table.rows[client] = map[string]string{}
	}
	table.rows[client][op] = outcome
}

func TestMain(m *testing.M) {
	code := m.Run()
	table.Lock()
	defer table.Unlock()
	if len(table.rows) > 0 {
		var b strings.Builder
		b.WriteString("\nclient x operation (isrbench interop suite)\n\n| client | " + strings.Join(operations, " | ") + " |\n|---|")
		b.WriteString(strings.Repeat("---|", len(operations)) + "\n")
		for _, c := range slices.Sorted(mapKeys(table.rows)) {
			b.WriteString("| " + c + " |")
			for _, op := range operations {
				v := table.rows[c][op]
				if v == "" {
					v = "not run"
				}
				b.WriteString(" " + v + " |")
			}
			b.WriteString("\n")
		}
		fmt.Print(b.String())
	}
	fmt.Print(txnTableText())
	timings.Lock()
	for _, l := range timings.lines {
		fmt.Println("rebalance, two-member group, " + l)
	}
	timings.Unlock()
	os.Exit(code)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// required reports whether a missing client is a failure (CI) rather than a skip.
func required() bool { return os.Getenv("ISRBENCH_REQUIRE_INTEROP") == "1" }

// need skips (or, with ISRBENCH_REQUIRE_INTEROP=1, fails) the test when a client is missing.
func need(t *testing.T, client string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	record(client, operations[0], "missing: "+err.Error())
	if required() {
		t.Fatalf("%s is not installed (ISRBENCH_REQUIRE_INTEROP=1): %v", client, err)
	}
	t.Skipf("%s is not installed: %v", client, err)
}

// startCluster starts a 3-broker embedded cluster with a small __consumer_offsets and a short
// group.initial.rebalance.delay.ms.
func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with the config changed by mutate (nil: none).
func startClusterWith(t *testing.T, mutate func(*cluster.Config)) *cluster.Cluster {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Broker.ReplicaFetchBackoffMs = 50
	cfg.Group.OffsetsTopicNumPartitions = 5
	cfg.Group.InitialRebalanceDelayMs = 300
	var mu sync.Mutex
	done := false
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return c
}

// createTopic creates topic with partitions and RF 3 through kadm.
func createTopic(t *testing.T, c *cluster.Cluster, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// client is one implementation of the suite's operations.
type client struct {
	name    string
	produce func(boot, topic string, start, count int) error
	// consume reads count records as a member of group, commits them, leaves the group and
	// returns their values.
	consume func(boot, topic, group string, count int) ([]string, error)
	delete  func(boot, topic string) error
	// deleteRecords deletes the records of topic-partition below offset (DeleteRecords);
	// nil where the suite has no such step for the client.
	deleteRecords func(boot, topic string, partition int32, offset int64) error
	// describeLogDirs returns, per broker, the replicas of topic it describes in its log
	// directories ("topic-partition" -> size in bytes; DescribeLogDirs); nil where the suite
	// has no such step for the client.
	describeLogDirs func(boot, topic string) (map[int32]map[string]int64, error)
}

// runSuite runs the suite for cl on a fresh topic: produce 100, group-consume them and
// commit, produce 50 more, consume again with the same group (exactly the 50 new records),
// delete the records of partition 0 below its high watermark and describe the log dirs
// (where the client has those steps), delete the topic (pending while deleteTopicPending).
func runSuite(t *testing.T, c *cluster.Cluster, cl client) {
	runSuiteOn(t, c, cl, c.Bootstrap())
}

// runSuiteOn is runSuite with the client connecting to boot (another listener of c).
func runSuiteOn(t *testing.T, c *cluster.Cluster, cl client, boot string) {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(cl.name)
	topic := "interop-" + name
	group := "interop-group-" + name
	createTopic(t, c, topic, 3)
	step := func(op string, fn func() error) bool {
		t.Helper()
		start := time.Now()
		err := fn()
		if err != nil {
			record(cl.name, op, "error: "+oneLine(err.Error()))
			t.Errorf("%s: %s: %v", cl.name, op, err)
			return false
		}
		record(cl.name, op, fmt.Sprintf("works (%.1f s)", time.Since(start).Seconds()))
		return true
	}
	if !step(operations[0], func() error { return cl.produce(boot, topic, 0, 100) }) {
		return
	}
	if !step(operations[1], func() error {
		got, err := cl.consume(boot, topic, group, 100)
		if err != nil {
			return err
		}
		return sameValues(got, 0, 100)
	}) {
		return
	}
	if !step(operations[2], func() error {
		if err := cl.produce(boot, topic, 100, 50); err != nil {
			return fmt.Errorf("second produce: %w", err)
		}
		got, err := cl.consume(boot, topic, group, 50)
		if err != nil {
			return err
		}
		return sameValues(got, 100, 50)
	}) {
		return
	}
	if cl.deleteRecords == nil {
		record(cl.name, operations[3], "n/a")
	} else {
		step(operations[3], func() error {
			_, hw, ok := c.ReplicaOffsets(leaderOf(c, topic, 0), topic, 0)
			if !ok {
				return fmt.Errorf("%s-0 has no leader replica", topic)
			}
			if err := cl.deleteRecords(boot, topic, 0, hw); err != nil {
				return err
			}
			return logStartsAt(c, topic, 0, hw)
		})
	}
	if cl.describeLogDirs == nil {
		record(cl.name, operations[4], "n/a")
	} else {
		step(operations[4], func() error {
			got, err := cl.describeLogDirs(boot, topic)
			if err != nil {
				return err
			}
			return sameLogDirs(c, topic, got)
		})
	}
	if deleteTopicPending {
		record(cl.name, operations[5], deletePendingReason)
		t.Logf("%s: delete topic: %s", cl.name, deletePendingReason)
		return
	}
	step(operations[5], func() error {
		if err := cl.delete(boot, topic); err != nil {
			return err
		}
		return deleted(c, topic)
	})
}

// leaderOf is the leader of topic-p, -1 if none.
func leaderOf(c *cluster.Cluster, topic string, p int32) int32 {
	st, ok := c.Controller().Partition(topic, p)
	if !ok {
		return -1
	}
	return st.Leader
}

// logStartsAt checks that every replica of topic-p starts at offset (a DeleteRecords is
// answered once every alive replica followed the leader's log start).
func logStartsAt(c *cluster.Cluster, topic string, p int32, offset int64) error {
	st, _ := c.Controller().Partition(topic, p)
	for _, id := range st.Replicas {
		if b := c.Broker(id); b != nil {
			if r, ok := b.Replica(topic, p); !ok || r.LogStart() != offset {
				return fmt.Errorf("broker %d: %s-%d log start %d after the deletion, want %d", id, topic, p, r.LogStart(), offset)
			}
		}
	}
	return nil
}

// sameLogDirs checks a client's description of topic's replicas against what each broker hosts.
func sameLogDirs(c *cluster.Cluster, topic string, got map[int32]map[string]int64) error {
	for _, id := range c.BrokerIDs() {
		want := map[string]int64{}
		for _, r := range c.Broker(id).LogDirReplicas() {
			if r.Topic == topic {
				want[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = r.Size
			}
		}
		if len(got[id]) != len(want) {
			return fmt.Errorf("broker %d: described %v, hosts %v", id, got[id], want)
		}
		for k, size := range want {
			if g, ok := got[id][k]; !ok || g != size {
				return fmt.Errorf("broker %d: %s described with %d bytes (present %v), hosts %d", id, k, g, ok, size)
			}
		}
	}
	return nil
}

// deleted checks that topic is gone from the controller and from every running broker (the
// delete was answered once the brokers applied it).
func deleted(c *cluster.Cluster, topic string) error {
	if _, ok := c.Controller().Partitions(topic); ok {
		return fmt.Errorf("the client reported %s deleted, but the controller still has it", topic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		return err
	}
	for _, id := range c.BrokerIDs() {
		if b := c.Broker(id); b != nil {
			for _, p := range b.Partitions() {
				if p.Topic == topic {
					return fmt.Errorf("broker %d still hosts %s-%d after the deletion", id, topic, p.Partition)
				}
			}
		}
	}
	return nil
}

// sameValues checks that got holds exactly the values start..start+count-1 (any order).
func sameValues(got []string, start, count int) error {
	seen := map[int]bool{}
	for _, v := range got {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("read %q, not a value of this suite", v)
		}
		if n < start || n >= start+count {
			return fmt.Errorf("read value %d, want only [%d, %d): committed offsets not honoured", n, start, start+count)
		}
		if seen[n] {
			return fmt.Errorf("read value %d twice", n)
		}
		seen[n] = true
	}
	if len(seen) != count {
		return fmt.Errorf("read %d distinct values, want %d", len(seen), count)
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// command runs an external client with a timeout and returns its stdout (stderr in the
// error).
func command(timeout time.Duration, dir, name string, args ...string) (string, error) {
	return commandEnv(timeout, nil, dir, name, args...)
}

// commandEnv is command with more environment variables (KEY=value).
func commandEnv(timeout time.Duration, env []string, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), args[0], err, lastLines(errb.String(), 3))
	}
	return out.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// scriptClient is a client driven through a script taking "produce BOOT TOPIC START COUNT",
// "consume BOOT TOPIC GROUP COUNT" and "delete BOOT TOPIC".
func scriptClient(name, dir, interpreter string, script ...string) client {
	return scriptClientEnv(name, nil, dir, interpreter, script...)
}

// scriptClientEnv is scriptClient with more environment variables for the script.
func scriptClientEnv(name string, env []string, dir, interpreter string, script ...string) client {
	run := func(args ...string) (string, error) {
		return commandEnv(90*time.Second, env, dir, interpreter, append(slices.Clone(script), args...)...)
	}
	return client{
		name: name,
		produce: func(boot, topic string, start, count int) error {
			_, err := run("produce", boot, topic, strconv.Itoa(start), strconv.Itoa(count))
			return err
		},
		consume: func(boot, topic, group string, count int) ([]string, error) {
			out, err := run("consume", boot, topic, group, strconv.Itoa(count))
			return lines(out), err
		},
		delete: func(boot, topic string) error {
			_, err := run("delete", boot, topic)
			return err
		},
	}
}
