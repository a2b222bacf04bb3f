package broker

import (
	"math"
	"testing"
)

func TestJavaStringHashCode(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"test", 3556498},
		{"hello", 99162322},
		{"Aa", 2112}, {"BB", 2112}, // the classic collision
		{"polygenelubricants", math.MinInt32},
		{"é", 0xE9},
		{"😀", 31*0xD83D + 0xDE00}, // surrogate pair, as Java's UTF-16
	} {
		if got := JavaStringHashCode(tc.s); got != tc.want {
			t.Errorf("hashCode(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestFetcherFor pins Kafka's AbstractFetcherManager.getFetcherId:
// Utils.abs(31 * topic.hashCode + partition) % numFetchers.
func TestFetcherFor(t *testing.T) {
	for _, tc := range []struct {
		topic string
		p     int32
		n     int
		want  int
	}{
		{"test", 0, 1, 0},
		{"test", 0, 2, 0}, // 31*3556498 = 110251438
		{"test", 0, 3, 1},
		{"test", 1, 3, 2},
		{"test", 2, 3, 0},
		{"test", 5, 4, 3},  // 110251443 % 4
		{"hello", 0, 3, 0}, // 31*99162322 = 3074031982 wraps to -1220935314; abs % 3
		// 31*MinInt32 wraps to MinInt32: Utils.abs(MinInt32) = 0.
		{"polygenelubricants", 0, 3, 0},
		{"polygenelubricants", 1, 3, 1}, // abs(MinInt32+1) = MaxInt32; % 3 = 1
		{"Aa", 7, 5, (31*2112 + 7) % 5},
		{"BB", 7, 5, (31*2112 + 7) % 5},
		{"x", 3, 0, 0}, // n < 1 treated as 1
	} {
		if got := FetcherFor(tc.topic, tc.p, tc.n); got != tc.want {
			t.Errorf("FetcherFor(%q, %d, %d) = %d, want %d", tc.topic, tc.p, tc.n, got, tc.want)
		}
	}
	// Spread: 100 partitions of a topic land on every one of 4 fetchers.
	seen := map[int]int{}
	for p := int32(0); p < 100; p++ {
		seen[FetcherFor("events", p, 4)]++
	}
	if len(seen) != 4 {
		t.Errorf("100 partitions over 4 fetchers used only %v", seen)
	}
}
