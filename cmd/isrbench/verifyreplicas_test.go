package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/records"
)

// TestVerifyReplicasUsage: bad flags are usage errors (exit 2) before any network I/O.
func TestVerifyReplicasUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify-replicas", "--topic", "a", "--topics-include", "b"}, "not both"},
		{[]string{"verify-replicas", "--topics-include", "("}, "is not a regular expression"},
		{[]string{"verify-replicas", "--partitions", "0,x"}, `"x" is not a partition number`},
		{[]string{"verify-replicas", "--time", "-1"}, "--time -1: want -2 (earliest) or a timestamp"},
		{[]string{"verify-replicas", "--fetch-size", "0"}, "--fetch-size 0"},
		{[]string{"verify-replicas", "--bootstrap", "nohost"}, "is not host:port"},
		{[]string{"verify-replicas", "--topic", "a b"}, "a topic name is"},
		{[]string{"verify-replicas", "--duration", "1s"}, "a duration >= 0 only with an interval"},
	} {
		var out, errb bytes.Buffer
		if code := exitCode(run(context.Background(), tc.args, &out, &errb), &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestVerifyReplicas: a healthy cluster verifies clean (exit 0); with the brokers stopped, a
// follower's segment is changed (a record byte with the batch CRC fixed: a valid, different
// batch) and, after a restart, verify-replicas names the partition, the offset and the
// replica (exit 1); a plain flipped byte is found by the broker itself and healed.
func TestVerifyReplicas(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logf = func(string, ...any) {}
	cfg.Broker.ReplicaFetchWaitMaxMs = 50
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	if err := c.CreateTopic("vr", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		for p := int32(0); p < 2; p++ {
			v := "value-" + strconv.Itoa(int(p)) + "-" + strconv.Itoa(i) + "-AAAAAAAA"
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "vr", Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()
	verify := func(wantCode int) string {
		t.Helper()
		var out, errb bytes.Buffer
		// The followers learn the last HW one fetch later: retry a clean verification until
		// every replica's HW reached 30 (ctx bounds it).
		for {
			out.Reset()
			errb.Reset()
			code := exitCode(run(ctx, []string{"verify-replicas", "--bootstrap", c.Bootstrap(), "--topic", "vr"}, &out, &errb), &errb)
			if code == wantCode && (wantCode != 0 || strings.Count(out.String(), "identical in [0, 30)") == 2) {
				return out.String() + errb.String()
			}
			if ctx.Err() != nil || wantCode != 0 {
				t.Fatalf("verify-replicas: exit %d (want %d)\n%s%s", code, wantCode, out.String(), errb.String())
			}
		}
	}
	out := verify(0)
	for _, want := range []string{"TOPIC  PARTITION  REPLICA  ROLE", "LOG-START  HIGH-WATERMARK  LOG-END-OFFSET  LAG", "partition vr-0: replicas", "partition vr-1: replicas", "max lag is 0 for partition vr-0 at offset 30 among 2 partitions"} {
		if !strings.Contains(out, want) {
			t.Errorf("healthy cluster: output lacks %q:\n%s", want, out)
		}
	}
	// --report-interval-ms: passes continue from where the last one ended until --duration.
	var rout, rerr bytes.Buffer
	if code := exitCode(run(ctx, []string{"verify-replicas", "--bootstrap", c.Bootstrap(), "--topic", "vr", "--report-interval-ms", "50", "--duration", "1s"}, &rout, &rerr), &rerr); code != 0 ||
		!strings.Contains(rout.String(), ": verification process is started.") || !strings.Contains(rout.String(), ": max lag is 0 for partition vr-0 at offset 30 among 2 partitions") {
		t.Errorf("--report-interval-ms: exit %d\n%s%s", code, rout.String(), rerr.String())
	}
	// --time: from the leader's first offset at or after a timestamp; none after a future one.
	var tout, terr bytes.Buffer
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if code := exitCode(run(ctx, []string{"verify-replicas", "--bootstrap", c.Bootstrap(), "--topic", "vr", "--time", future}, &tout, &terr), &terr); code != 0 ||
		strings.Count(tout.String(), "identical in [30, 30) (0 batches)") != 2 {
		t.Errorf("--time in the future: exit %d\n%s%s", code, tout.String(), terr.String())
	}
	st, _ := c.Controller().Partition("vr", 0)
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	restart := func(part int32, follower int32, plant func(seg []byte)) {
		t.Helper()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		seg := filepath.Join(cfg.DataDir, "broker-"+strconv.Itoa(int(follower)), "vr-"+strconv.Itoa(int(part)), "00000000000000000000.log")
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		plant(b)
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err = cluster.Start(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// A record of offset 7 changed, its batch's CRC fixed.
	restart(0, follower, func(seg []byte) {
		err := records.Split(seg, func(batch []byte, h records.Header) error {
			if i := bytes.Index(batch, []byte("value-0-7-AAAAAAAA")); i >= 0 {
				batch[i+len("value-0-7-")] = 'B'
				binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
			}
			return nil
		})
		if err != nil || !bytes.Contains(seg, []byte("value-0-7-BAAAAAAA")) {
			t.Fatalf("planting the changed record: %v", err)
		}
	})
	out = verify(1)
	id := strconv.Itoa(int(follower))
	if !strings.Contains(out, "DIVERGED partition vr-0: replica ") || !strings.Contains(out, " at offset 7: checksum ") ||
		!strings.Contains(out, "replica "+id+" ") || !strings.Contains(out, "identical before it: [0, 7)") ||
		!strings.Contains(out, "partition vr-1: replicas") || !strings.Contains(out, "1 of 2 partitions diverge") {
		t.Errorf("a changed record on replica %s: output\n%s", id, out)
	}
	// In partition 1, a byte of offset 12's record flipped on a follower, the CRC left as it was.
	st1, _ := c.Controller().Partition("vr", 1)
	f1 := st1.Replicas[0]
	if f1 == st1.Leader {
		f1 = st1.Replicas[1]
	}
	restart(1, f1, func(seg []byte) {
		i := bytes.Index(seg, []byte("value-1-12-AAAAAAAA"))
		if i < 0 {
			t.Fatal("no record value-1-12 in the segment")
		}
		seg[i+len("value-1-12-")] ^= 0x01
	})
	// A byte that fails its batch's CRC is never served: the broker finds it (at the read,
	// or by the scrub at start), truncates the replica below it and re-replicates. So
	// verify-replicas sees partition 1 healed, while partition 0's valid but different batch
	// (which no CRC can tell) is still named.
	for {
		out = verify(1)
		if strings.Contains(out, "partition vr-1: replicas") && strings.Contains(out, "identical in [0, 30)") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partition 1 not healed:\n%s", out)
		}
	}
	if !strings.Contains(out, " at offset 7: checksum ") || !strings.Contains(out, "1 of 2 partitions diverge") {
		t.Errorf("after the flipped byte on replica %d of partition 1 healed: output\n%s", f1, out)
	}
	if ds := c.Broker(f1).DamageStats(); ds.Found == 0 {
		t.Errorf("broker %d: damage stats %+v: want the flipped byte found", f1, ds)
	}
}
