package netfetch_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// fillPartition appends `batches` batches of 256 x 1 KiB records to topic-0
// with acks=1 produce requests over a raw connection.
func fillPartition(b *testing.B, rc *kafkatest.Client, topic string, batches int) {
	recs := make([]records.Record, 256)
	for i := range recs {
		recs[i] = records.Record{Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	for i := 0; i < batches; i++ {
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(9)
		p.Acks = 1
		p.TimeoutMillis = 10000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = topic
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), recs)
		pt.Partitions = append(pt.Partitions, pp)
		p.Topics = append(p.Topics, pt)
		resp := kmsg.NewPtrProduceResponse()
		rc.RoundTrip(p, resp)
		if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			b.Fatalf("fill produce: error code %d", ec)
		}
	}
}

// BenchmarkFetchServe measures how fast one broker serves a consumer that
// fetches a pre-filled partition (8 MiB) from offset 0 again and again over
// loopback, 1 MiB (replica.fetch.max.bytes' default) or 8 MiB per
// response, with sendfile (zerocopy=on) and with pread+write (off).
//
// client=buffer reads each response into one buffer of its size (a client
// that keeps the records); client=discard reads it through a 128 KiB
// buffer that stays in cache and drops the bytes, so the client's own
// copying costs as little as possible and the server's path dominates.
func BenchmarkFetchServe(b *testing.B) {
	for _, client := range []string{"buffer", "discard", "trunc"} {
		for _, fetchMiB := range []int32{1, 8} {
			for _, zc := range []bool{true, false} {
				benchFetchServe(b, fetchMiB, zc, client)
			}
		}
	}
}

// benchFetchServe fetches the same fetchMiB from one partition over and over. The client
// reads each response into a buffer of the response's size (buffer), through a 128 KiB
// buffer (discard), or not at all: recv(MSG_TRUNC) makes the kernel drop the bytes without
// copying them (trunc), so that, on loopback where the receiver shares the 2 cores, the
// figure is the server's cost to serve, as with a client on another machine.
func benchFetchServe(b *testing.B, fetchMiB int32, zc bool, client string) {
	{
		discard := client != "buffer"
		b.Run(fmt.Sprintf("client=%s/fetch=%dMiB/zerocopy=%v", client, fetchMiB, map[bool]string{true: "on", false: "off"}[zc]), func(b *testing.B) {
			c := clustertest.Start(b, 1, func(cfg *cluster.Config) { cfg.ZeroCopy = zc })
			if err := c.CreateTopic("bench", 1, 1, nil); err != nil {
				b.Fatal(err)
			}
			rc := kafkatest.Dial(b, c.Addr(0))
			fillPartition(b, rc, "bench", 32) // 32 x 256 KiB = 8 MiB
			rc.Conn.SetDeadline(time.Time{})

			frame := consumerFetchFrame("bench", 64<<20, fetchMiB<<20)

			var sz [4]byte
			var body []byte
			fetchOnce := func() int {
				if _, err := rc.Conn.Write(frame); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rc.R, sz[:]); err != nil {
					b.Fatal(err)
				}
				n := int(binary.BigEndian.Uint32(sz[:]))
				if client == "trunc" {
					left := n
					if k := min(left, rc.R.Buffered()); k > 0 { // bytes bufio already holds
						rc.R.Discard(k)
						left -= k
					}
					if err := recvTrunc(rc.Conn, left); err != nil {
						b.Fatal(err)
					}
					return n
				}
				if discard {
					if body == nil {
						body = make([]byte, 128<<10)
					}
					for left := n; left > 0; {
						k, err := rc.R.Read(body[:min(left, len(body))])
						if err != nil {
							b.Fatal(err)
						}
						left -= k
					}
					return n
				}
				if cap(body) < n {
					body = make([]byte, n)
				}
				if _, err := io.ReadFull(rc.R, body[:n]); err != nil {
					b.Fatal(err)
				}
				return n
			}
			n := fetchOnce()
			if n < int(fetchMiB)<<20-(256<<10) {
				b.Fatalf("fetch response %d bytes, want about %d MiB", n, fetchMiB)
			}
			before := c.Stats()
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				fetchOnce()
			}
			b.StopTimer()
			after := c.Stats()
			b.ReportMetric(float64(after.SendfileBytes-before.SendfileBytes)/float64(b.N), "sendfile-B/op")
			b.ReportMetric(float64(after.CopyBytes-before.CopyBytes)/float64(b.N), "copy-B/op")
			b.ReportMetric(float64(after.SendfileCalls-before.SendfileCalls)/float64(b.N), "sendfile-calls/op")
		})
	}
}

// consumerFetchFrame is the whole frame (size prefix, v1 header with client id "b", body) of a
// consumer Fetch v12 of partition 0 of topic from offset 0, without a session.
func consumerFetchFrame(topic string, maxBytes, partitionMaxBytes int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, maxBytes
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = partitionMaxBytes
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	frame := []byte{0, 0, 0, 0, 0, 1, 0, 12, 0, 0, 0, 1, 0, 1, 'b', 0}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// rtSet is BenchmarkProduceRoundTrip's -rt.set: broker settings of its isrbench cluster, so
// that one invocation can interleave a setting off and on (A B A B) on a host whose speed varies.
var rtSet = flag.String("rt.set", "", "comma-separated key=value broker settings for BenchmarkProduceRoundTrip's isrbench cluster (e.g. isrbench.produce.answer.inline=false)")

// BenchmarkProduceRoundTrip measures one-at-a-time produce of a 1 KiB record with kgo to a
// 3-broker RF 3 cluster (min.insync.replicas 2) over loopback, with acks=1 and acks=all
// (idempotent), and the same client against franz-go's kfake (3 brokers, no replication) in the
// same run: the reference for how much of the round trip is client and protocol. isrbench-rf1
// is the same 3-broker cluster with an RF 1 topic: no follower fetches run beside the
// producer, so against isrbench's acks=1 it shows what the followers' work on the same cores
// adds to an answer that does not wait for them. isrbench-rf2 has one follower
// (min.insync.replicas 2), the shape of BenchmarkLoopbackFloor's hops=4/appends=2; isrbench
// (RF 3) has two, the shape of its followers=2 floor.
func BenchmarkProduceRoundTrip(b *testing.B) {
	for _, target := range []string{"isrbench", "isrbench-rf2", "isrbench-rf1", "kfake"} {
		for _, acks := range []string{"1", "all"} {
			b.Run(target+"/acks="+acks, func(b *testing.B) {
				opts := []kgo.Opt{kgo.DefaultProduceTopic("rt"), kgo.ProducerLinger(0)}
				if acks == "1" {
					opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
				}
				var cl *kgo.Client
				if target == "kfake" {
					kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(1, "rt"))
					if err != nil {
						b.Fatal(err)
					}
					defer kc.Close()
					if cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...)}, opts...)...); err != nil {
						b.Fatal(err)
					}
					defer cl.Close()
				} else {
					c := clustertest.Start(b, 3, func(cfg *cluster.Config) {
						for _, kv := range strings.Split(*rtSet, ",") {
							if k, v, ok := strings.Cut(kv, "="); ok {
								if err := cfg.Set(k, v); err != nil {
									b.Fatal(err)
								}
							}
						}
					})
					rf, minISR := int16(3), "2"
					switch target {
					case "isrbench-rf1":
						rf, minISR = 1, "1"
					case "isrbench-rf2":
						rf = 2
					}
					if err := c.CreateTopic("rt", 1, rf, map[string]string{"min.insync.replicas": minISR}); err != nil {
						b.Fatal(err)
					}
					cl = clustertest.NewClient(b, c, opts...)
				}
				produceRoundTrips(b, cl)
			})
		}
	}
}

// produceRoundTrips produces b.N 1 KiB records one at a time and reports their p50 and p99.
func produceRoundTrips(b *testing.B, cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	val := bytes.Repeat([]byte{'x'}, 1024)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(val)))
	b.ReportAllocs()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// recvTrunc drops the next n bytes of c in the kernel: recv(MSG_TRUNC) on a TCP socket
// discards up to len bytes instead of copying them (Linux; the buffer is never written),
// waiting through the runtime poller on EAGAIN.
func recvTrunc(c net.Conn, n int) error {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	if len(truncBuf) < n {
		truncBuf = make([]byte, n)
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for n > 0 {
			k, _, err := unix.Recvfrom(int(fd), truncBuf[:n], unix.MSG_TRUNC|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
				continue
			case err != nil:
				rerr = err
				return true
			case k == 0:
				rerr = io.ErrUnexpectedEOF
				return true
			}
			n -= k
		}
		return true
	})
	if err != nil {
		return err
	}
	return rerr
}

// truncBuf only gives recv(MSG_TRUNC) a length: the kernel never writes it.
var truncBuf []byte
