package target

import (
	"strings"
	"testing"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestKafkaSettingsCoverBrokerKeys: every broker setting of the spec (its YAML path under
// broker:, and topic.min.insync.replicas) says how it reaches a Kafka cluster, and the table
// names no key the spec lacks.
func TestKafkaSettingsCoverBrokerKeys(t *testing.T) {
	for _, p := range spec.Params() {
		if strings.HasPrefix(p.Path(), "broker.") || p.Key == "topic.min.insync.replicas" {
			if _, ok := kafkaSettings[p.Key]; !ok {
				t.Errorf("broker setting %s has no entry in kafkaSettings (how does a kafka:// cluster get it?)", p.Key)
			}
		}
	}
	for k := range kafkaSettings {
		if spec.Lookup(k) == nil {
			t.Errorf("kafkaSettings names %s, which is not a spec key", k)
		}
	}
}

func TestThreadPoolStep(t *testing.T) {
	for _, tc := range []struct {
		cur        []int
		target     int
		want       int
		impossible bool
	}{
		{[]int{1}, 4, 2, false},
		{[]int{2}, 4, 4, false},
		{[]int{4}, 1, 2, false},
		{[]int{3}, 1, 1, false}, // 1 >= 3/2 (integer halves, as Kafka divides)
		{[]int{1, 2}, 8, 2, false},
		{[]int{1, 5}, 3, 2, false},
		{[]int{1, 8}, 3, 0, true}, // [4, 2]: no value Kafka accepts on both
		{[]int{5}, 5, 5, false},
	} {
		got, ok := threadPoolStep(tc.cur, tc.target)
		if ok == tc.impossible || (ok && got != tc.want) {
			t.Errorf("threadPoolStep(%v, %d) = %d, %v; want %d, %v", tc.cur, tc.target, got, ok, tc.want, !tc.impossible)
		}
	}
}
