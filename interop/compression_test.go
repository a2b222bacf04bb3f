package interop

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/records"
)

// TestKcatCompression produces with kcat -z for every codec: librdkafka must not fall back to
// uncompressed ("Broker does not support compression type", which it decides from the
// advertised API versions), the stored batches must carry the codec, and kcat must read the
// records back (decompressing what isrbench served intact).
func TestKcatCompression(t *testing.T) {
	kcat := needKcat(t)
	c := startCluster(t)
	boot := c.Bootstrap()
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		topic := "kcat-z-" + codec
		createTopic(t, c, topic, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, kcat, "-P", "-b", boot, "-t", topic, "-z", codec, "-X", "acks=all", "-d", "msg")
		var in strings.Builder
		for i := 0; i < 200; i++ {
			fmt.Fprintf(&in, "%s-%d-%s\n", codec, i, strings.Repeat("x", 100))
		}
		cmd.Stdin = strings.NewReader(in.String())
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kcat -P -z %s: %v: %s", codec, err, lastLines(string(out), 3))
		}
		if strings.Contains(string(out), "does not support compression") {
			record("kcat -z "+codec, operations[0], "error: sent uncompressed")
			t.Fatalf("kcat -z %s: %s", codec, lastLines(string(out), 2))
		}
		st, _ := c.Controller().Partition(topic, 0)
		r, ok := c.Broker(st.Leader).Replica(topic, 0)
		if !ok {
			t.Fatalf("no replica of %s-0 on its leader", topic)
		}
		s, err := r.Read(0, r.HW(), 16<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := s.ReadAll(nil)
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		codecs := map[int8]bool{}
		if err := records.Split(raw, func(_ []byte, h records.Header) error { codecs[h.Compression()] = true; return nil }); err != nil {
			t.Fatalf("%s: stored batches: %v", codec, err)
		}
		if len(codecs) != 1 || codecs[records.CompressionNone] {
			t.Fatalf("kcat -z %s: stored batches use codecs %v", codec, codecs)
		}
		got, err := command(30*time.Second, "", kcat, "-C", "-b", boot, "-t", topic, "-e", "-q", "-f", "%s\n")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(lines(got)); n != 200 {
			t.Fatalf("kcat -C read %d of 200 %s records", n, codec)
		}
		record("kcat -z "+codec, operations[0], "works (compressed batch stored, read back)")
	}
}
