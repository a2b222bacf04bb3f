package spec

import (
	"strings"
	"testing"
)

// TestRestartProducerFault: the restart-producer kind takes a transactional producer's number,
// no duration, and is a kind kafka:// targets run.
func TestRestartProducerFault(t *testing.T) {
	const head = "name: t\nproducers: [{count: 2, transactional.id: a}, {count: 1}]\n"
	s, err := Parse([]byte(head + "faults: [{at: 1s, kind: restart-producer, target: 1}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Faults[0]; f.Kind != "restart-producer" || f.Target != "1" {
		t.Fatalf("fault %+v", f)
	}
	if _, err := CheckTarget("kafka://127.0.0.1:9092", s); err != nil {
		t.Fatalf("kafka:// refuses restart-producer: %v", err)
	}
	for _, tc := range []struct{ fault, want string }{
		{"{at: 1s, kind: restart-producer, target: 3}", `faults[0].target: "3" is not a producer; allowed a transactional producer's number 0..2`},
		{"{at: 1s, kind: restart-producer, target: 2}", "faults[0].target: producer 2 is not transactional; restart-producer needs producers.transactional.id"},
		{"{at: 1s, kind: restart-producer}", `faults[0].target: "leader" is not a producer`},
		{"{at: 1s, kind: restart-producer, target: -1}", `"-1" is not a producer`},
		{"{at: 1s, duration: 1s, kind: restart-producer, target: 0}", "faults[0].duration: 1s; restart-producer is instantaneous, allowed 0s"},
		{"{at: 1s, kind: restart-consumer, target: 0}", "restart-producer"},
	} {
		_, err := Parse([]byte(head + "faults: [" + tc.fault + "]\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.fault, err, tc.want)
		}
	}
}
