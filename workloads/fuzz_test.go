package workloads

import (
	"testing"
)

// FuzzParse: any bytes give a spec or an error, never a panic; a parsed spec validates.
func FuzzParse(f *testing.F) {
	for _, n := range SpecNames() {
		b, _ := embeddedSpecs.ReadFile("specs/" + n + ".yaml")
		f.Add(b)
	}
	f.Add([]byte("faults: [{at: 1s, kind: pause}]\nsweep: {acks: [all, 1]}\n"))
	f.Add([]byte("broker: {num.replica.fetchers: 99999999999999999999}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a spec Validate rejects: %v", err)
		}
		_ = s.Config()
	})
}

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
