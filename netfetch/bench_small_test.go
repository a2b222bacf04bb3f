package netfetch_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// BenchmarkFetchSmall measures the fetch a follower or a tailing consumer makes most: one
// partition whose new records are a single small batch. Each op fetches the one batch of
// `records` bytes from offset 0 and reads the whole response. path=sendfile sends the records
// with sendfile(2) whatever their size (isrbench.zero.copy.min.bytes=0), path=auto copies
// batches below the default isrbench.zero.copy.min.bytes, path=copy is isrbench.zero.copy=false.
// The figures that matter are ns/op and syscalls/op of the paths side by side.
func BenchmarkFetchSmall(b *testing.B) {
	for _, size := range []int{256, 4 << 10, 16 << 10, 64 << 10} {
		for _, path := range []string{"sendfile", "auto", "copy"} {
			b.Run(fmt.Sprintf("records=%s/path=%s", sizeName(size), path), func(b *testing.B) {
				benchFetchSmall(b, size, path)
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func benchFetchSmall(b *testing.B, size int, path string) {
	c := clustertest.Start(b, 1, func(cfg *cluster.Config) {
		switch path {
		case "sendfile":
			cfg.ZeroCopyMinBytes = 0
		case "copy":
			cfg.ZeroCopy = false
		}
	})
	if err := c.CreateTopic("small", 1, 1, nil); err != nil {
		b.Fatal(err)
	}
	rc := kafkatest.Dial(b, c.Addr(0))
	batch := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), []records.Record{{Value: make([]byte, size-70)}})
	resp := kafkatest.NewProduceResp()
	rc.RoundTrip(kafkatest.NewProduce("small", 1, batch), resp)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		b.Fatalf("produce: error %d", ec)
	}
	rc.Conn.SetDeadline(time.Time{})

	frame := consumerFetchFrame("small", 1<<20, 1<<20)

	var sz [4]byte
	body := make([]byte, 1<<20)
	fetchOnce := func() int {
		if _, err := rc.Conn.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rc.R, sz[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(rc.R, body[:n]); err != nil {
			b.Fatal(err)
		}
		return n
	}
	if n := fetchOnce(); n < len(batch) {
		b.Fatalf("fetch response %d bytes, want the %d-byte batch in it", n, len(batch))
	}
	before := c.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fetchOnce()
	}
	b.StopTimer()
	after := c.Stats()
	b.ReportMetric(float64(after.SendfileCalls-before.SendfileCalls)/float64(b.N), "sendfile-calls/op")
	b.ReportMetric(float64(after.CopyBytes-before.CopyBytes)/float64(b.N), "copy-B/op")
}
