package interop

import (
	"strings"
	"testing"
	"time"
)

// TestConfluentManyPartitions: librdkafka (one ProduceRequest per partition, answered in order
// per connection) produces one acks=all record to each of 300 partitions RF 3 and reads them
// back. The same script runs at 10,000 partitions against `isrbench serve` (README: many
// partitions); this scaled version runs in seconds.
func TestConfluentManyPartitions(t *testing.T) {
	needPython(t, "confluent-kafka-python", "confluent_kafka")
	c := startCluster(t)
	out, err := command(3*time.Minute, "python", python(), "many_partitions.py", c.Bootstrap(), "many", "300")
	t.Log(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
}
