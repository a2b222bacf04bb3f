package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

// TestOpsCommandsUsage: the operator commands reject bad flags with a usage error (exit 2)
// before any network I/O.
func TestOpsCommandsUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"partitions": [{"topic": "a", "partition": 0, "offset": 1}, {"topic": "a", "partition": 0, "offset": 2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"delete-records"}, "--offset-json-file FILE or --topic T --partition P --offset O is required"},
		{[]string{"delete-records", "--topic", "t"}, "--topic needs --partition P and --offset O"},
		{[]string{"delete-records", "--topic", "t", "--partition", "0", "--offset", "-2"}, "want an offset >= 0, or -1"},
		{[]string{"delete-records", "--topic", "t", "--partition", "-1", "--offset", "1"}, "--partition -1"},
		{[]string{"delete-records", "--offset-json-file", bad}, "duplicate topic partitions: a-0"},
		{[]string{"delete-records", "--offset-json-file", bad, "--topic", "t"}, "not both"},
		{[]string{"delete-records", "--offset-json-file", filepath.Join(t.TempDir(), "none")}, "no such file"},
		{[]string{"log-dirs"}, "--describe is required"},
		{[]string{"groups"}, "exactly one of --list, --describe"},
		{[]string{"groups", "--describe"}, "--group is required"},
		{[]string{"groups", "--list", "--group", "g"}, "--group apply only with"},
		{[]string{"groups", "--reset-offsets", "--group", "g", "--topic", "t"}, "exactly one of --to-earliest"},
		{[]string{"groups", "--reset-offsets", "--group", "g", "--to-latest"}, "needs --topic T or --all-topics"},
		{[]string{"groups", "--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"}, "needs --topic T or --all-topics"},
		{[]string{"groups", "--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"}, `"x" is not a partition number`},
		{[]string{"groups", "--describe", "--group", "g", "--to-latest"}, "--to-latest apply only with --reset-offsets"},
		{[]string{"groups", "--delete-offsets", "--group", "g"}, "--delete-offsets needs --topic"},
		{[]string{"topics", "--create", "--topic", "t", "--replica-assignment", "0:0"}, "broker 0 is listed twice"},
		{[]string{"topics", "--create", "--topic", "t", "--replica-assignment", "0:1,2"}, "partition 1 has 1 replicas, partition 0 has 2"},
		{[]string{"topics", "--create", "--topic", "t", "--replica-assignment", "0,x"}, `"x" is not a broker id`},
		{[]string{"topics", "--create", "--topic", "t", "--replica-assignment", "0", "--partitions", "2"}, "--partitions apply only with --create without --replica-assignment"},
		{[]string{"log-dirs", "--describe", "--broker-list", "a"}, `"a" is not a broker id`},
		{[]string{"log-dirs", "--describe", "--topic-list", "a,b c"}, "a topic name is"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := exitCode(run(context.Background(), tc.args, &out, &errb), &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb.String(), tc.want)
			}
		})
	}
}

// TestOpsCommands drives the operator commands against an embedded cluster as an operator
// would against serve: delete-records, topics --create --replica-assignment, groups,
// log-dirs.
func TestOpsCommands(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logf = func(string, ...any) {}
	cfg.Broker.ReplicaFetchWaitMaxMs = 50
	cfg.Group.InitialRebalanceDelayMs = 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	boot := c.Bootstrap()
	cmd := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(ctx, append(args[:1:1], append([]string{"--bootstrap", boot}, args[1:]...)...), &out, &errb)
		if code := exitCode(err, &errb); code != wantCode {
			t.Fatalf("isrbench %s: exit %d, want %d: %v (stdout %q, stderr %q)", strings.Join(args, " "), code, wantCode, err, out.String(), errb.String())
		}
		return out.String()
	}
	if err := c.CreateTopic("ops", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(boot, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 10; i++ {
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ops", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// delete-records, from flags and from Kafka's JSON file.
	if out := cmd(0, "delete-records", "--topic", "ops", "--partition", "0", "--offset", "4"); out != "Executing records delete operation\nRecords delete operation completed:\npartition: ops-0\tlow_watermark: 4\n" {
		t.Errorf("delete-records printed %q", out)
	}
	js := filepath.Join(t.TempDir(), "offsets.json")
	if err := os.WriteFile(js, []byte(`{"partitions": [{"topic": "ops", "partition": 1, "offset": -1}, {"topic": "ops", "partition": 0, "offset": 99}], "version": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := cmd(1, "delete-records", "--offset-json-file", js)
	if !strings.Contains(out, "partition: ops-0\terror: OFFSET_OUT_OF_RANGE") || !strings.Contains(out, "partition: ops-1\tlow_watermark: 10\n") {
		t.Errorf("delete-records --offset-json-file printed %q", out)
	}
	if out := cmd(0, "offsets", "--topic", "ops"); !strings.Contains(out, "ops:0:4:10\nops:1:10:10\n") {
		t.Errorf("offsets after delete-records printed %q", out)
	}

	// topics --create --replica-assignment.
	if out := cmd(0, "topics", "--create", "--topic", "placed", "--replica-assignment", "1:2,2:0", "--config", "min.insync.replicas=2"); out != "Created topic placed.\n" {
		t.Errorf("topics --create --replica-assignment printed %q", out)
	}
	if sts, _ := c.Controller().Partitions("placed"); len(sts) != 2 || !slices.Equal(sts[0].Replicas, []int32{1, 2}) || !slices.Equal(sts[1].Replicas, []int32{2, 0}) {
		t.Errorf("placed: %v", sts)
	}
	if got := c.Controller().TopicConfig("placed"); got["min.insync.replicas"] != "2" {
		t.Errorf("placed configs %v", got)
	}

	// groups: a kgo member of g1 consumes gt and commits.
	if err := c.CreateTopic("gt", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(p int32, n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "gt", Partition: p, Value: []byte("g")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 10)
	produce(1, 10)
	member, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(boot, ",")...), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("gt"),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	for n := 0; n < 20; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		n += len(fs.Records())
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	row := func(out string, p int) []string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 9 && f[0] == "g1" && f[1] == "gt" && f[2] == strconv.Itoa(p) {
				return f
			}
		}
		t.Fatalf("no row for gt-%d in %q", p, out)
		return nil
	}
	out = cmd(0, "groups", "--describe", "--group", "g1")
	if !strings.Contains(out, "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID") {
		t.Errorf("groups --describe header: %q", out)
	}
	if f := row(out, 0); f[3] != "10" || f[4] != "10" || f[5] != "0" || f[6] == "-" || f[7] == "-" {
		t.Errorf("gt-0 of the stable group: %v", f)
	}
	if out := cmd(1, "groups", "--reset-offsets", "--group", "g1", "--topic", "gt", "--to-earliest", "--execute"); out != "" {
		t.Errorf("reset of an active group printed %q", out)
	}
	if out := cmd(1, "groups", "--delete-offsets", "--group", "g1", "--topic", "gt"); !strings.Contains(out, "gt                             0               Error: GROUP_SUBSCRIBED_TO_TOPIC") {
		t.Errorf("delete-offsets of a subscribed topic printed %q", out)
	}
	member.Close()
	produce(0, 5)
	out = cmd(0, "groups", "--describe", "--group", "g1")
	if !strings.Contains(out, "Consumer group 'g1' has no active members.") {
		t.Errorf("groups --describe of the empty group: %q", out)
	}
	if f := row(out, 0); f[3] != "10" || f[4] != "15" || f[5] != "5" || f[6] != "-" {
		t.Errorf("gt-0 of the empty group: %v", f)
	}
	out = cmd(0, "groups", "--reset-offsets", "--group", "g1", "--topic", "gt:0", "--to-earliest")
	if !strings.Contains(out, "g1                             gt                             0          0") || !strings.Contains(out, "No action will be performed") {
		t.Errorf("dry run printed %q", out)
	}
	if f := row(cmd(0, "groups", "--describe", "--group", "g1"), 0); f[3] != "10" {
		t.Errorf("a dry run moved gt-0 to %s", f[3])
	}
	cmd(0, "groups", "--reset-offsets", "--group", "g1", "--topic", "gt:0", "--to-offset", "3", "--execute")
	if f := row(cmd(0, "groups", "--describe", "--group", "g1"), 0); f[3] != "3" || f[5] != "12" {
		t.Errorf("after --to-offset 3: %v", f)
	}
	out = cmd(0, "groups", "--reset-offsets", "--group", "g1", "--all-topics", "--to-offset", "99", "--execute")
	if !strings.Contains(out, "WARN: New offset (99) is higher than latest offset for topic partition gt-0. Value will be set to 15") {
		t.Errorf("--to-offset past the end printed %q", out)
	}
	if f := row(cmd(0, "groups", "--describe", "--group", "g1"), 1); f[3] != "10" || f[5] != "0" {
		t.Errorf("after --all-topics --to-offset 99: %v", f)
	}
	if out := cmd(0, "groups", "--list"); !strings.Contains(out, "g1\n") {
		t.Errorf("groups --list printed %q", out)
	}
	if out := cmd(0, "groups", "--delete-offsets", "--group", "g1", "--topic", "gt:1"); !strings.Contains(out, "Request succeed for deleting offsets with topic gt group g1") ||
		!strings.Contains(out, "gt                             1               Successful") {
		t.Errorf("delete-offsets printed %q", out)
	}
	if f := row(cmd(0, "groups", "--describe", "--group", "g1"), 0); f[3] != "15" {
		t.Errorf("gt-0 after deleting gt-1's offset: %v", f)
	}
	if out := cmd(0, "groups", "--delete", "--group", "g1"); out != "Deletion of requested consumer groups ('g1') was successful.\n" {
		t.Errorf("groups --delete printed %q", out)
	}
	if out := cmd(0, "groups", "--list"); strings.Contains(out, "g1\n") {
		t.Errorf("groups --list after the deletion printed %q", out)
	}
	if out := cmd(1, "groups", "--describe", "--group", "g1"); !strings.Contains(out, "Error: Consumer group 'g1' does not exist.") {
		t.Errorf("describe of a deleted group printed %q", out)
	}

	// log-dirs --describe: Kafka's two lines and JSON, every broker, only the listed topics.
	out = cmd(0, "log-dirs", "--describe", "--topic-list", "ops")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || lines[0] != "Querying brokers for log directories information" || lines[1] != "Received log directory information from brokers 0,1,2" {
		t.Fatalf("log-dirs printed %q", out)
	}
	var dirs kafkatool.LogDirsJSON
	if err := json.Unmarshal([]byte(lines[2]), &dirs); err != nil {
		t.Fatal(err)
	}
	if len(dirs.Brokers) != 3 || dirs.Version != 1 {
		t.Fatalf("log-dirs JSON %+v", dirs)
	}
	for _, b := range dirs.Brokers {
		if len(b.LogDirs) != 1 || b.LogDirs[0].Error != nil || len(b.LogDirs[0].Partitions) != 2 ||
			b.LogDirs[0].Partitions[0].Partition != "ops-0" || b.LogDirs[0].Partitions[1].Size == 0 {
			t.Errorf("broker %d: %+v", b.Broker, b.LogDirs)
		}
	}
	if out := cmd(0, "log-dirs", "--describe", "--broker-list", "1", "--topic-list", "none"); !strings.HasSuffix(out, `{"brokers":[{"broker":1,"logDirs":[{"partitions":[],"error":null,"logDir":"`+filepath.Join(cfg.DataDir, "broker-1")+`"}]}],"version":1}`+"\n") {
		t.Errorf("log-dirs --broker-list 1 printed %q", out)
	}
}
