package records

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckProduceFormat: the magic and compression a Produce version may carry.
func TestCheckProduceFormat(t *testing.T) {
	v2 := AppendBatch(nil, 0, 0, 0, sampleRecords())
	withMagic := func(m byte) []byte { b := append([]byte(nil), v2...); b[offMagic] = m; return b }
	zstd := append([]byte(nil), v2...)
	zstd[offAttributes+1] |= CompressionZstd
	for _, c := range []struct {
		name    string
		version int16
		b       []byte
		want    error
	}{
		{"v2 batch, Produce v3", 3, v2, nil},
		{"v2 batch, Produce v9", 9, v2, nil},
		{"too short for a magic", 3, v2[:offMagic], nil},
		{"magic 1, Produce v2", 2, withMagic(1), kerr.UnsupportedForMessageFormat},
		{"magic 0, Produce v0", 0, withMagic(0), kerr.UnsupportedForMessageFormat},
		{"magic 1, Produce v3", 3, withMagic(1), kerr.InvalidRecord},
		{"zstd, Produce v6", 6, zstd, kerr.UnsupportedCompressionType},
		{"zstd, Produce v7", 7, zstd, nil},
	} {
		err := CheckProduceFormat(c.version, c.b)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestCheckBatchSizes: every batch of a set is held to the bound, not only the first.
func TestCheckBatchSizes(t *testing.T) {
	small := AppendBatch(nil, 0, 0, 0, sampleRecords())
	big := AppendBatch(nil, 0, 0, 0, []Record{{Value: make([]byte, 500)}})
	set := append(append(append([]byte(nil), small...), small...), big...)
	if err := CheckBatchSizes(set, int64(len(big))); err != nil {
		t.Errorf("every batch within %d bytes: %v", len(big), err)
	}
	if err := CheckBatchSizes(set, int64(len(big)-1)); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("the third batch is %d bytes, bound %d: %v, want MESSAGE_TOO_LARGE", len(big), len(big)-1, err)
	}
	if err := CheckBatchSizes(set[:len(set)-3], int64(len(small))); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("a torn last batch still declares its size: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = CheckBatchSizes(set, int64(len(big))) }); n != 0 {
		t.Errorf("CheckBatchSizes allocates %v times", n)
	}
}

// FuzzCheckProduce: neither check panics or loops on any bytes.
func FuzzCheckProduce(f *testing.F) {
	f.Add(int16(3), AppendBatch(nil, 0, 0, 0, sampleRecords()), int64(10))
	f.Add(int16(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, int64(0))
	f.Fuzz(func(t *testing.T, version int16, b []byte, maxBytes int64) {
		_ = CheckProduceFormat(version, b)
		_ = CheckBatchSizes(b, maxBytes)
	})
}
