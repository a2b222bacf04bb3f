package workloads

import (
	"testing"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestReportDefaults: every config key of the spec has its default, durations as Config
// writes them, and Kafka's default where the harness uses another.
func TestReportDefaults(t *testing.T) {
	d := ReportDefaults()
	cfg := spec.DefaultSpec().Config()
	for k := range cfg {
		if k == "name" || k == "description" {
			if _, ok := d[k]; ok {
				t.Errorf("%s has a default: it is a label", k)
			}
			continue
		}
		if _, ok := d[k]; !ok {
			t.Errorf("config key %s has no default", k)
		}
	}
	for _, tc := range []struct {
		key          string
		value, kafka any
	}{
		{"replica.lag.time.max.ms", int64(30000), nil},
		{"num.replica.fetchers", int64(1), nil},
		{"duration", "20s", nil},
		{"producers.acks", "all", nil},
		{"log.segment.bytes", int64(67108864), int64(1073741824)},
		{"log.retention.bytes", int64(268435456), int64(-1)},
		{"log.retention.check.interval.ms", int64(1000), int64(300000)},
		{"faults", 0, nil},
	} {
		got := d[tc.key]
		if got.Value != tc.value || got.Kafka != tc.kafka {
			t.Errorf("%s: default %#v (Kafka %#v), want %#v (Kafka %#v)", tc.key, got.Value, got.Kafka, tc.value, tc.kafka)
		}
	}
}
