package kafkatool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OffsetJSON is kafka-delete-records.sh's --offset-json-file format:
//
//	{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}
//
// offset -1 means the high watermark (delete every record consumers can read).
type OffsetJSON struct {
	Version    *int `json:"version"`
	Partitions []struct {
		Topic     *string `json:"topic"`
		Partition *int32  `json:"partition"`
		Offset    *int64  `json:"offset"`
	} `json:"partitions"`
}

// ParseOffsetJSON parses an offset JSON file (OffsetJSON) into kadm offsets. Errors name the
// entry and the field: a missing field, a version other than 1, a topic-partition given
// twice (as kafka-delete-records.sh refuses it), an offset below -1, no partitions.
func ParseOffsetJSON(data []byte) (kadm.Offsets, error) {
	var f OffsetJSON
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("offset JSON: %w", err)
	}
	if f.Version != nil && *f.Version != 1 {
		return nil, fmt.Errorf("offset JSON: version %d is not supported (want 1)", *f.Version)
	}
	if len(f.Partitions) == 0 {
		return nil, errors.New(`offset JSON: no partitions; want {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}`)
	}
	var os kadm.Offsets
	for i, p := range f.Partitions {
		switch {
		case p.Topic == nil || *p.Topic == "":
			return nil, fmt.Errorf("offset JSON: partitions[%d]: no topic", i)
		case p.Partition == nil || *p.Partition < 0:
			return nil, fmt.Errorf("offset JSON: partitions[%d] (%s): no partition, or a negative one", i, *p.Topic)
		case p.Offset == nil || *p.Offset < -1:
			return nil, fmt.Errorf("offset JSON: partitions[%d] (%s-%d): no offset, or one below -1 (-1 = the high watermark)", i, *p.Topic, *p.Partition)
		}
		if _, dup := os.Lookup(*p.Topic, *p.Partition); dup {
			return nil, fmt.Errorf("offset JSON contains duplicate topic partitions: %s-%d", *p.Topic, *p.Partition)
		}
		os.Add(kadm.Offset{Topic: *p.Topic, Partition: *p.Partition, At: *p.Offset, LeaderEpoch: -1})
	}
	return os, nil
}

// DeleteRecords deletes the records below each offset (kafka-delete-records.sh) and prints,
// per partition in order, its new low watermark or its error, as Kafka's tool does. The
// result is an error when any partition failed.
func DeleteRecords(ctx context.Context, adm *kadm.Client, os kadm.Offsets, w io.Writer) error {
	fmt.Fprintln(w, "Executing records delete operation")
	rs, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) {
			return fmt.Errorf("delete-records: %w", err)
		}
	}
	fmt.Fprintln(w, "Records delete operation completed:")
	failed := 0
	for _, o := range os.Sorted() {
		r, ok := rs.Lookup(o.Topic, o.Partition)
		switch {
		case !ok:
			failed++
			fmt.Fprintf(w, "partition: %s-%d\terror: no answer (%v)\n", o.Topic, o.Partition, err)
		case r.Err != nil:
			failed++
			fmt.Fprintf(w, "partition: %s-%d\terror: %v\n", o.Topic, o.Partition, r.Err)
		default:
			fmt.Fprintf(w, "partition: %s-%d\tlow_watermark: %d\n", o.Topic, o.Partition, r.LowWatermark)
		}
	}
	if failed > 0 {
		return fmt.Errorf("delete-records: %d of %d partitions failed", failed, len(os.Sorted()))
	}
	return nil
}
