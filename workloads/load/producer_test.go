package load

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestProducerPacerDither: a producer's schedule is dithered exactly when its group's
// producers.pacer.dither is (the default).
func TestProducerPacerDither(t *testing.T) {
	if !spec.DefaultSpec().Producers.PacerDither {
		t.Fatal("producers.pacer.dither is false by default")
	}
	for _, on := range []bool{false, true} {
		ps := spec.DefaultSpec().Producers
		ps.PacerDither = on
		pr, err := NewProducer(1, []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, ps, "t", 2500, Window{End: 1 << 62}, WaitSpin, "")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		pc, err := pr.pacer(start, start.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		moved := 0
		for b := int64(0); b < 16; b++ {
			slot := b * ditherBlock
			if pc.slotNs(slot) != int64(float64(slot)*pc.interval) {
				moved++
			}
		}
		pc.Close()
		pr.Close()
		if on && moved == 0 || !on && moved > 0 {
			t.Errorf("producers.pacer.dither=%v: %d of 16 blocks moved", on, moved)
		}
	}
}
