package load

import (
	"testing"
)

// FuzzParseHeader: record values of any shape decode or fail cleanly; PutHeader round-trips.
func FuzzParseHeader(f *testing.F) {
	v := make([]byte, 40)
	PutHeader(v, Header{ProducerID: 7, Seq: 42, Intended: 1e18})
	f.Add(v)
	f.Add([]byte("ISRB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		out := make([]byte, HeaderSize)
		PutHeader(out, h)
		if h2, err := ParseHeader(out); err != nil || h2 != h {
			t.Fatalf("round trip %+v -> %+v, %v", h, h2, err)
		}
	})
}
