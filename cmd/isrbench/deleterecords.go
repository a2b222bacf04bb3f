package main

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/cmd/isrbench/internal/kafkatool"
)

func init() {
	register("delete-records", "delete the records below an offset (kafka-delete-records.sh)", cmdDeleteRecords)
}

// cmdDeleteRecords is kafka-delete-records.sh: the partitions and offsets come from
// --offset-json-file (Kafka's format, see kafkatool.OffsetJSON) or from --topic,
// --partition and --offset (-1 = the high watermark). Each partition's low watermark or error
// is printed; exit 1 when any failed.
func cmdDeleteRecords(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("delete-records", "delete-records --bootstrap ADDR (--offset-json-file FILE | --topic T --partition P --offset O)", stderr)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "bootstrap servers host:port[,host:port]")
	commandConfig := addCommandConfig(fs)
	file := fs.String("offset-json-file", "", `JSON file of the partitions and offsets: {"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}`)
	topic := fs.String("topic", "", "topic (instead of --offset-json-file)")
	partition := fs.Int("partition", -1, "partition (with --topic)")
	offset := fs.Int64("offset", -2, "delete the records below this offset (with --topic; -1 = the high watermark)")
	timeout := fs.Duration("timeout", 30*time.Second, "request timeout (the brokers wait for every replica to delete)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("delete-records: unexpected arguments %q", fs.Args())
	}
	if err := checkTimeout("delete-records", *timeout); err != nil {
		return err
	}
	var offsets kadm.Offsets
	switch {
	case *file != "" && *topic != "":
		return usagef("delete-records: give either --offset-json-file or --topic, not both")
	case *file != "":
		if err := onlyWith(fs, "--topic", "partition", "offset"); err != nil {
			return err
		}
		data, err := os.ReadFile(*file)
		if err != nil {
			return usagef("delete-records: --offset-json-file: %v", err)
		}
		if offsets, err = kafkatool.ParseOffsetJSON(data); err != nil {
			return usagef("delete-records: --offset-json-file %s: %v", *file, err)
		}
	case *topic != "":
		if err := checkTopicName("delete-records", *topic); err != nil {
			return err
		}
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["partition"] || !given["offset"] {
			return usagef("delete-records: --topic needs --partition P and --offset O")
		}
		if *partition < 0 || *partition > 1<<31-1 {
			return usagef("delete-records: --partition %d: want a partition number >= 0", *partition)
		}
		if *offset < -1 {
			return usagef("delete-records: --offset %d: want an offset >= 0, or -1 for the high watermark", *offset)
		}
		offsets.Add(kadm.Offset{Topic: *topic, Partition: int32(*partition), At: *offset, LeaderEpoch: -1})
	default:
		return usagef("delete-records: --offset-json-file FILE or --topic T --partition P --offset O is required")
	}
	adm, err := newAdmin(ctx, "delete-records", *bootstrap, *commandConfig, stderr)
	if err != nil {
		return err
	}
	defer adm.Close()
	adm.SetTimeoutMillis(int32(min(*timeout, time.Hour) / time.Millisecond))
	ctx, cancel := context.WithTimeout(ctx, *timeout+5*time.Second)
	defer cancel()
	return kafkatool.DeleteRecords(ctx, adm, offsets, stdout)
}
