package workloads

import (
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestScenarioReassign runs the reassign spec in a short form, without and with a throttle:
// every replica on broker 0 moves to the free broker under acks=all load, each partition's
// catch-up time is reported, nothing acknowledged is lost and the final replicas are
// identical.
func TestScenarioReassign(t *testing.T) {
	skipShort(t)
	for _, throttle := range []string{"0", "2000000"} {
		t.Run("throttle="+throttle, func(t *testing.T) {
			s := scenario(t, "reassign", "duration=4s", "warmup=500ms", "rate=400", "reassign.throttle="+throttle)
			s.Faults = []spec.Fault{{At: 500 * time.Millisecond, Kind: "reassign", Target: "0", To: -1}}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			res, err := runScenario(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Faults) != 1 {
				t.Fatalf("faults %+v", res.Faults)
			}
			f := res.Faults[0]
			// Placement over 4 brokers puts broker 0 in 4 of the 6 partitions (RF 3).
			if f.Error != "" || len(f.CatchUpS) == 0 || f.EndS < f.AtS || !strings.Contains(f.Detail, "catch-up until the new replicas joined the ISR") {
				t.Fatalf("fault %+v", f)
			}
			for tp, s := range f.CatchUpS {
				if s <= 0 || s > f.EndS-f.AtS+0.001 {
					t.Errorf("%s caught up in %.3fs, fault from %.3fs to %.3fs", tp, s, f.AtS, f.EndS)
				}
			}
			d := res.Durability
			if d.Acked == 0 || d.Lost != 0 || d.OutOfOrder != 0 || !d.ReplicasIdentical {
				t.Errorf("durability %+v", d)
			}
		})
	}
}

// TestReassignFaultSpec: the keys of kind reassign and their checks.
func TestReassignFaultSpec(t *testing.T) {
	base := "name: r\nbrokers: 4\ntopic: {partitions: 2, replication.factor: 3}\nduration: 10s\nfaults:\n"
	for _, tc := range []struct {
		fault string
		want  string // "" = valid
	}{
		{"  - {at: 1s, kind: reassign, target: 0}", ""},
		{"  - {at: 1s, kind: reassign, target: leader, to: 3, add: true}", ""},
		{"  - {at: 1s, kind: reassign, target: 0, duration: 2s}", "a reassignment completes by itself"},
		{"  - {at: 1s, kind: reassign, target: 0, to: 4}", "faults[0].to: 4 is not a broker"},
		{"  - {at: 1s, kind: reassign, target: 0, add: maybe}", "is not a boolean"},
		{"  - {at: 1s, kind: kill-broker, target: 0, to: 3}", "to/add apply only to kind reassign"},
	} {
		s, err := spec.Parse([]byte(base + tc.fault + "\n"))
		if err == nil {
			err = s.Validate()
		}
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.fault, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.fault, err, tc.want)
		}
	}
	s, err := spec.Parse([]byte("name: r\nbrokers: 3\ntopic: {replication.factor: 3}\nfaults:\n  - {at: 1s, kind: reassign, target: 0}\n"))
	if err == nil {
		err = s.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "no broker is free") {
		t.Errorf("RF 3 on 3 brokers: %v", err)
	}
}
