package results

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestPartitionsCSV: partitions.csv's layout (golden): every replica in the leo column (a
// stopped one as "-", all "n/a" when the target cannot see LEOs), the produce errors of the
// interval sorted and only the non-zero ones.
func TestPartitionsCSV(t *testing.T) {
	var b bytes.Buffer
	w := NewPartitionsCSV(&b)
	w.Write(PartitionRow{T: 0.1, Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3},
		HW: 100, LEO: map[int32]int64{1: 120, 2: 110, 3: 100}, LogStart: 0})
	w.Write(PartitionRow{T: 0.2, Partition: 1, Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 3, 1}, ISR: []int32{2},
		HW: 50, LEO: map[int32]int64{2: 60}, UnderReplicated: true, UnderMinISR: true,
		ProduceErrors: map[string]int64{"NOT_ENOUGH_REPLICAS": 7, "REQUEST_TIMED_OUT": 0, "NOT_LEADER_OR_FOLLOWER": 2}, LogStart: 10})
	w.Write(PartitionRow{T: 12.3456, Partition: 2, Leader: -1, LeaderEpoch: 5, Replicas: []int32{3}, ISR: nil,
		HW: -1, NoLEO: true, UnderReplicated: true, UnderMinISR: true, LogStart: -1})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), strings.Join(PartitionsColumns, ",")+"\n") {
		t.Errorf("header: %q", strings.SplitN(b.String(), "\n", 2)[0])
	}
	golden(t, "partitions.csv", b.Bytes())
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestPartitionsCSVWriteError: a write error is returned by Flush.
func TestPartitionsCSVWriteError(t *testing.T) {
	w := NewPartitionsCSV(failWriter{})
	w.Write(PartitionRow{Partition: 0, Replicas: []int32{1}})
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Flush = %v, want the write error", err)
	}
}
