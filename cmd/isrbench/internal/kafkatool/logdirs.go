package kafkatool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// LogDirsJSON is what kafka-log-dirs.sh --describe prints after its two header lines (and
// DescribeLogDirs prints): per broker, per log directory, the replicas with their size in
// bytes, offset lag and whether they are future replicas.
type LogDirsJSON struct {
	Brokers []LogDirsBroker `json:"brokers"`
	Version int             `json:"version"`
}

// LogDirsBroker is one broker of LogDirsJSON.
type LogDirsBroker struct {
	Broker  int32        `json:"broker"`
	LogDirs []LogDirJSON `json:"logDirs"`
}

// LogDirJSON is one log directory of LogDirsJSON. Error is null, or the Kafka error name
// (KAFKA_STORAGE_ERROR for an offline directory) where Kafka's tool prints the exception class.
type LogDirJSON struct {
	Partitions []LogDirPartitionJSON `json:"partitions"`
	Error      *string               `json:"error"`
	LogDir     string                `json:"logDir"`
}

// LogDirPartitionJSON is one replica of LogDirsJSON; Partition is "topic-partition".
type LogDirPartitionJSON struct {
	Partition string `json:"partition"`
	Size      int64  `json:"size"`
	OffsetLag int64  `json:"offsetLag"`
	IsFuture  bool   `json:"isFuture"`
}

// DescribeLogDirs queries brokers (every broker when empty) for their log directories and
// prints, as kafka-log-dirs.sh --describe does, two header lines and one JSON line, keeping
// only the replicas of topics (every topic when empty). A broker that does not answer is an
// error after the others are printed.
func DescribeLogDirs(ctx context.Context, adm *kadm.Client, brokers []int32, topics []string, w io.Writer) error {
	fmt.Fprintln(w, "Querying brokers for log directories information")
	if len(brokers) == 0 {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return fmt.Errorf("log-dirs: metadata: %w", err)
		}
		for _, b := range md.Brokers {
			brokers = append(brokers, b.NodeID)
		}
	}
	slices.Sort(brokers)
	brokers = slices.Compact(brokers)
	out := LogDirsJSON{Version: 1, Brokers: []LogDirsBroker{}}
	var answered []string
	var errs []error
	for _, id := range brokers {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, id, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			continue
		}
		answered = append(answered, strconv.Itoa(int(id)))
		lb := LogDirsBroker{Broker: id, LogDirs: []LogDirJSON{}}
		for _, d := range dirs.Sorted() {
			ld := LogDirJSON{LogDir: d.Dir, Partitions: []LogDirPartitionJSON{}}
			if d.Err != nil {
				name := d.Err.Error()
				var ke *kerr.Error
				if errors.As(d.Err, &ke) {
					name = ke.Message
				}
				ld.Error = &name
			}
			for _, p := range d.Topics.Sorted() {
				if len(topics) > 0 && !slices.Contains(topics, p.Topic) {
					continue
				}
				ld.Partitions = append(ld.Partitions, LogDirPartitionJSON{
					Partition: p.Topic + "-" + strconv.Itoa(int(p.Partition)),
					Size:      p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture,
				})
			}
			lb.LogDirs = append(lb.LogDirs, ld)
		}
		out.Brokers = append(out.Brokers, lb)
	}
	fmt.Fprintf(w, "Received log directory information from brokers %s\n", strings.Join(answered, ","))
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("log-dirs: %w", err)
	}
	fmt.Fprintln(w, string(data))
	if len(errs) > 0 {
		return fmt.Errorf("log-dirs: %w", errors.Join(errs...))
	}
	return nil
}
