package netfetch_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

func TestAPIVersions(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	rc := kafkatest.Dial(t, c.Addr(0))
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		resp := kmsg.NewPtrApiVersionsResponse()
		rc.RoundTrip(req, resp)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != netfetch.Advertised() {
			t.Fatalf("v%d: error %d, %d keys", v, resp.ErrorCode, len(resp.ApiKeys))
		}
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 1 && k.MaxVersion != 13 {
				t.Errorf("Fetch advertised up to v%d, want 13 (topic ids, KIP-516)", k.MaxVersion)
			}
		}
	}
	// A too-new version gets UNSUPPORTED_VERSION, encoded as v0, with the ranges.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	corr := rc.Send(req)
	got, body, err := rc.Recv()
	if err != nil || got != corr {
		t.Fatalf("recv: %v corr %d/%d", err, got, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v0 decode of the UNSUPPORTED_VERSION answer: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("error %d keys %d, want UNSUPPORTED_VERSION with ranges", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestMalformedRequestsCloseTheConnection(t *testing.T) {
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) { cfg.SocketRequestMaxBytes = 1 << 20 })
	frame := func(b ...[]byte) []byte {
		var body []byte
		for _, x := range b {
			body = append(body, x...)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	hdr := func(key, version int16) []byte {
		b := kbin.AppendInt16(nil, key)
		b = kbin.AppendInt16(b, version)
		b = kbin.AppendInt32(b, 7)
		return kbin.AppendString(b, "x")
	}
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, 2<<20)},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{"tiny size", frame([]byte{0, 1})},
		{"unknown api key", frame(hdr(999, 0))},
		{"unsupported api (JoinGroup)", frame(hdr(11, 5), []byte{0, 0})},
		{"fetch v13", frame(hdr(1, 13), []byte{0})},
		{"produce v2", frame(hdr(0, 2))},
		{"truncated metadata body", frame(hdr(3, 4), []byte{0, 0, 0, 5})},
		{"truncated header", frame([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'a'})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := kafkatest.Dial(t, c.Addr(0))
			if _, err := rc.Conn.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			rc.ExpectClosed()
		})
	}
	// The server still answers afterwards.
	rc := kafkatest.Dial(t, c.Addr(0))
	rc.RoundTrip(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
}

func TestAcksZeroProduceGetsNoResponse(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	if err := c.CreateTopic("a0", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(7)
	p.Acks = 0
	p.TimeoutMillis = 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "a0"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = kafkatest.Batch(0)
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	rc.Send(p)
	// The next response must be the metadata one (correlation id 2).
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	resp := kmsg.NewPtrMetadataResponse()
	rc.RoundTrip(md, resp)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Leader != 0 {
		t.Fatalf("metadata %+v", resp.Topics)
	}
	// acks=1 answers, and the acks=0 batch was appended before it (offset 1).
	p.Acks = 1
	pr := kmsg.NewPtrProduceResponse()
	rc.RoundTrip(p, pr)
	if e := pr.Topics[0].Partitions[0]; e.ErrorCode != 0 || e.BaseOffset != 1 {
		t.Fatalf("acks=1 produce: %+v", e)
	}
	// Invalid acks are refused per partition.
	p.Acks = 2
	rc.RoundTrip(p, pr)
	if e := pr.Topics[0].Partitions[0]; e.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2 produce: %+v", e)
	}
	// A failed acks=0 produce (a partition this broker does not have) has no response to
	// carry the error: the broker closes the connection, as Kafka does.
	p.Acks = 0
	p.Topics[0].Partitions[0].Partition = 7
	rc.Send(p)
	if _, err := rc.R.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after a failed acks=0 produce the connection is still open (read: %v)", err)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.NumPartitions = 2 })
	rc := kafkatest.Dial(t, c.Addr(1))
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	name := "auto-made"
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &name
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = true
	resp := kmsg.NewPtrMetadataResponse()
	rc.RoundTrip(md, resp)
	if len(resp.Brokers) != 3 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata %+v", resp)
	}
	if rf := len(resp.Topics[0].Partitions[0].Replicas); rf != 3 {
		t.Errorf("auto-created replication factor %d, want min(3, brokers) = 3", rf)
	}
	md.AllowAutoTopicCreation = false
	other := "not-made"
	md.Topics[0].Topic = &other
	rc.RoundTrip(md, resp)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("no auto-create: error %d", resp.Topics[0].ErrorCode)
	}
}

// FuzzServeRequest writes arbitrary bytes to a server connection: the
// server must answer or close, never panic, and keep serving others.
func FuzzServeRequest(f *testing.F) {
	c := clustertest.Start(f, 1, func(cfg *cluster.Config) {
		cfg.SocketRequestMaxBytes = 1 << 20
		cfg.Logf = func(string, ...any) {}
	})
	if err := c.CreateTopic("fz", 1, 1, nil); err != nil {
		f.Fatal(err)
	}
	seed := func(req kmsg.Request) []byte {
		b := []byte{0, 0, 0, 0}
		b = kbin.AppendInt16(b, req.Key())
		b = kbin.AppendInt16(b, req.GetVersion())
		b = kbin.AppendInt32(b, 1)
		b = kbin.AppendString(b, "fuzz")
		if req.IsFlexible() {
			b = append(b, 0)
		}
		b = req.AppendTo(b)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	f.Add(seed(av))
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	f.Add(seed(md))
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(12)
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "fz"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fr.Topics = append(fr.Topics, ft)
	f.Add(seed(fr))
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(9)
	pr.Acks = 1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "fz"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = kafkatest.Batch(0)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	f.Add(seed(pr))
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.SetVersion(9)
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "fg", 10000, 10000, "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	f.Add(seed(jg))
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.SetVersion(8)
	oc.Group, oc.Generation = "fg", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
	f.Add(seed(oc))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"fg"}
	f.Add(seed(fc))
	// The admin APIs, at their highest versions (names that do not exist: the seeds run
	// as ordinary tests).
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("fz-none")}}
	f.Add(seed(dt))
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "fz-none", Count: 2, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}}}
	f.Add(seed(cp))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dc.IncludeSynonyms = true
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
	f.Add(seed(dc))
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.SetVersion(1)
	ia.ValidateOnly = true
	ia.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "num.replica.fetchers", Value: kmsg.StringPtr("2")}}}}
	f.Add(seed(ia))
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.SetVersion(2)
	ac.ValidateOnly = true
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz",
		Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1")}}}}
	f.Add(seed(ac))
	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "fz-none", Partitions: []int32{0}}}
	f.Add(seed(el))
	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.SetVersion(2)
	f.Add(seed(dcl))
	// The operator APIs (topic ids, DeleteRecords, DescribeLogDirs, OffsetDelete,
	// DescribeProducers, DescribeClientQuotas, CreateTopics with an assignment).
	mdID := kmsg.NewPtrMetadataRequest()
	mdID.SetVersion(12)
	mdID.Topics = []kmsg.MetadataRequestTopic{{TopicID: [16]byte{1}}}
	f.Add(seed(mdID))
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.SetVersion(2)
	dr.TimeoutMillis = 10
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "fz", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Offset: 0}}}}
	f.Add(seed(dr))
	dld := kmsg.NewPtrDescribeLogDirsRequest()
	dld.SetVersion(4)
	dld.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "fz", Partitions: []int32{0}}}
	f.Add(seed(dld))
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "fg"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	f.Add(seed(od))
	dpr := kmsg.NewPtrDescribeProducersRequest()
	dpr.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "fz", Partitions: []int32{0}}}
	f.Add(seed(dpr))
	dcq := kmsg.NewPtrDescribeClientQuotasRequest()
	dcq.SetVersion(1)
	dcq.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 2}}
	f.Add(seed(dcq))
	fr13 := kmsg.NewPtrFetchRequest()
	fr13.SetVersion(13)
	fr13.Topics = []kmsg.FetchRequestTopic{{TopicID: [16]byte{2}, Partitions: []kmsg.FetchRequestTopicPartition{{}}}}
	fr13.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{TopicID: [16]byte{3}, Partitions: []int32{0}}}
	f.Add(seed(fr13))
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.ValidateOnly = true
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "fz-none", NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignment: []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{0}}}}}
	f.Add(seed(ct))
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 9, 0, 0, 0, 1, 0xff, 0xff})
	addr := c.Addr(0)
	f.Fuzz(func(t *testing.T, data []byte) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		conn.Write(data)
		conn.(*net.TCPConn).CloseWrite()
		// Read until the server closes (or answers and waits for more:
		// the deadline ends that). Bounded: at most 16 MiB read.
		io.Copy(io.Discard, io.LimitReader(conn, 16<<20))
	})
	// The server survived: it still answers.
	rc := kafkatest.Dial(f, addr)
	rc.RoundTrip(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
}

// kcatOrSkip returns kcat's path; skips when absent unless
// ISRBENCH_REQUIRE_KCAT is set (CI), where it fails.
func kcatOrSkip(t *testing.T) string {
	p, err := exec.LookPath("kcat")
	if err == nil {
		return p
	}
	if os.Getenv("ISRBENCH_REQUIRE_KCAT") != "" {
		t.Fatalf("kcat not found (%v) and ISRBENCH_REQUIRE_KCAT is set: install it with apt-get install kcat", err)
	}
	t.Skipf("kcat not found (%v): install the Debian package kcat to run this test (set ISRBENCH_REQUIRE_KCAT=1 to make it required)", err)
	return ""
}

func TestKcatProduceConsumeAndList(t *testing.T) {
	kcat := kcatOrSkip(t)
	c := clustertest.Start(t, 3, nil)
	if err := c.CreateTopic("kc", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, "message-"+strings.Repeat("x", i%10)+string(rune('a'+i%26)))
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kcat, append([]string{"-b", c.Bootstrap()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.WaitDelay = 5 * time.Second
		done := make(chan struct{})
		timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill(); close(done) })
		out, err := cmd.CombinedOutput()
		if !timer.Stop() {
			<-done
			t.Fatalf("kcat %v timed out; output:\n%s", args, out)
		}
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(strings.Join(lines, "\n")+"\n", "-P", "-t", "kc", "-p", "0", "-X", "acks=all")
	out := run("", "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != len(lines) {
		t.Fatalf("kcat consumed %d lines, want %d:\n%s", len(got), len(lines), out)
	}
	for i, l := range got {
		if want := fmt.Sprintf("%d %s", i, lines[i]); l != want {
			t.Fatalf("line %d = %q, want %q", i, l, want)
		}
	}
	meta := run("", "-L", "-t", "kc")
	if !strings.Contains(meta, "3 brokers:") || !strings.Contains(meta, "isrs:") || !strings.Contains(meta, `topic "kc" with 1 partitions`) {
		t.Fatalf("kcat -L output:\n%s", meta)
	}
	t.Logf("kcat -L:\n%s", meta)
}

func TestPausedServerAnswersNothingUntilResume(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	rc := kafkatest.Dial(t, c.Addr(0))
	rc.RoundTrip(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	if err := c.PauseBroker(0); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseBroker(0); err == nil {
		t.Error("pausing a paused broker succeeded")
	}
	corr := rc.Send(kmsg.NewPtrApiVersionsRequest())
	// Absence can only be observed for a while: 200 ms of silence.
	rc.Conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := rc.Recv(); err == nil {
		t.Fatal("paused broker answered")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("paused broker: %v, want silence with the connection open", err)
	}
	if err := c.ResumeBroker(0); err != nil {
		t.Fatal(err)
	}
	rc.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _, err := rc.Recv()
	if err != nil || got != corr {
		t.Fatalf("after resume: corr %d err %v, want the pending answer %d", got, err, corr)
	}
	// Closing the cluster with a paused broker (cleanup) must not hang.
	if err := c.PauseBroker(0); err != nil {
		t.Fatal(err)
	}
	rc.Send(kmsg.NewPtrApiVersionsRequest())
}

// TestFetchGoroutineLabeled checks the pprof labels of a connection
// goroutine parked in a Fetch long poll: broker=<id>, role=fetch-serve.
func TestFetchGoroutineLabeled(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	if err := c.CreateTopic("lbl", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 30000, 1<<20, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "lbl"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	rc.Send(req)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var sb strings.Builder
		pprof.Lookup("goroutine").WriteTo(&sb, 1)
		if strings.Contains(sb.String(), `"role":"fetch-serve"`) && strings.Contains(sb.String(), `"broker":"0"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine labeled broker=0 role=fetch-serve while a fetch is parked")
		}
		<-tick.C
	}
}

// TestProduceResponseReuseFollowsEachRequest: a connection reuses its
// produce request and response objects; each response must have exactly
// the shape of its own request (no topic or partition left over from a
// larger earlier one), with fresh offsets and errors.
func TestProduceResponseReuseFollowsEachRequest(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	for _, tp := range []string{"ra", "rb"} {
		if err := c.CreateTopic(tp, 2, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	big := kafkatest.NewProduce("ra", 1, kafkatest.Batch(0))
	big.Topics[0].Partitions = append(big.Topics[0].Partitions, big.Topics[0].Partitions[0])
	big.Topics[0].Partitions[1].Partition = 1
	big.Topics = append(big.Topics, kafkatest.NewProduce("rb", 1, kafkatest.Batch(0)).Topics[0])
	big.Topics[1].Partitions[0].Partition = 9 // unknown partition: an error
	type part struct {
		topic   string
		p       int32
		ec      int16
		baseOff int64
	}
	shape := func(r *kmsg.ProduceResponse) []part {
		var out []part
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, part{rt.Topic, rp.Partition, rp.ErrorCode, rp.BaseOffset})
			}
		}
		return out
	}
	resp := kafkatest.NewProduceResp()
	rc.RoundTrip(big, resp)
	want := []part{{"ra", 0, 0, 0}, {"ra", 1, 0, 0}, {"rb", 9, kerr.UnknownTopicOrPartition.Code, -1}}
	if got := shape(resp); !slices.Equal(got, want) {
		t.Fatalf("first response %v, want %v", got, want)
	}
	small := kafkatest.NewProduce("rb", 1, kafkatest.Batch(0))
	resp = kafkatest.NewProduceResp()
	rc.RoundTrip(small, resp)
	want = []part{{"rb", 0, 0, 0}}
	if got := shape(resp); !slices.Equal(got, want) {
		t.Fatalf("second response %v, want %v", got, want)
	}
	rc.RoundTrip(big, resp)
	want = []part{{"ra", 0, 0, 1}, {"ra", 1, 0, 1}, {"rb", 9, kerr.UnknownTopicOrPartition.Code, -1}}
	if got := shape(resp); !slices.Equal(got, want) {
		t.Fatalf("third response %v, want %v", got, want)
	}
}
