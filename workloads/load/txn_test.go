package load

import (
	"bytes"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
)

func TestAbortTxnRatio(t *testing.T) {
	for _, ratio := range []float64{0, 0.1, 0.5, 1} {
		n := 0
		for k := uint64(0); k < 10000; k++ {
			if AbortTxn(42, k, ratio) {
				n++
			}
			if AbortTxn(42, k, ratio) != AbortTxn(42, k, ratio) {
				t.Fatal("not deterministic")
			}
		}
		if got := float64(n) / 10000; got < ratio-0.02 || got > ratio+0.02 {
			t.Errorf("ratio %g: aborted %g of the transactions", ratio, got)
		}
	}
	same := 0
	for k := uint64(0); k < 1000; k++ {
		if AbortTxn(1, k, 0.5) == AbortTxn(2, k, 0.5) {
			same++
		}
	}
	if same > 600 || same < 400 {
		t.Errorf("two transactional ids abort the same transactions %d times of 1000", same)
	}
}

// TestLSOLagWeighting: HW advances queue records; the LSO passing them records each one's lag
// from its HW advance, a transaction held below the LSO counting until it ends.
func TestLSOLagWeighting(t *testing.T) {
	o := &LSOObserver{win: Window{Start: 0, End: 1 << 62}, parts: []lsoPart{{hw: 10, lso: 10}}, Lag: results.NewRecorder()}
	ms := int64(time.Millisecond)
	o.advanceHW(0, 15, 1*ms) // records 10..14
	o.advanceHW(0, 20, 2*ms) // records 15..19
	o.advanceLSO(0, 12, 3*ms)
	o.advanceLSO(0, 11, 4*ms) // never back
	o.advanceLSO(0, 20, 9*ms)
	if n := o.pending(); n != 0 {
		t.Fatalf("pending %d", n)
	}
	h := o.Lag.Snapshot()
	if h.Count() != 10 {
		t.Fatalf("count %d, want 10 records", h.Count())
	}
	// 2 records at 2 ms, 3 at 8 ms, 5 at 7 ms.
	want := (2*2 + 3*8 + 5*7) * 1000 / 10.0
	if m := h.Mean(); m < want*0.99 || m > want*1.01 {
		t.Fatalf("mean %v µs, want %v", m, want)
	}
}

func TestTransform(t *testing.T) {
	v := make([]byte, 40)
	PutHeader(v, Header{ProducerID: 7, Seq: 3, Intended: 9})
	out := Transform(v)
	if !bytes.Equal(out[:HeaderSize], v[:HeaderSize]) || !transformed(out) || transformed(v) {
		t.Fatalf("transform %x of %x", out, v)
	}
	if h, err := ParseHeader(out); err != nil || h.Seq != 3 {
		t.Fatalf("header %+v %v", h, err)
	}
}
