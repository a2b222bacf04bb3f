package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestPartitionMetadataWrittenAfterCreate: with isrbench.partition.metadata.async (the
// default) every replica of a new topic gets its partition.metadata, with the topic's id,
// from each broker's writer goroutine soon after the creation; off, before CreateTopic returns.
func TestPartitionMetadataWrittenAfterCreate(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			dir := t.TempDir()
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
				cfg.DataDir = dir
				cfg.Broker.PartitionMetadataAsync = async
			})
			const parts = 12
			if err := c.CreateTopic("pm", parts, 3, nil); err != nil {
				t.Fatal(err)
			}
			id, ok := c.Controller().TopicID("pm")
			if !ok {
				t.Fatal("no topic id for pm")
			}
			want := "topic_id: " + id.String()
			deadline := time.Now().Add(time.Minute)
			for b := 0; b < 3; b++ {
				for p := 0; p < parts; p++ {
					path := filepath.Join(dir, fmt.Sprintf("broker-%d", b), fmt.Sprintf("pm-%d", p), "partition.metadata")
					for {
						data, err := os.ReadFile(path)
						if err == nil && strings.Contains(string(data), want) {
							break
						}
						if !async || time.Now().After(deadline) {
							t.Fatalf("%s: %q, %v; want it to name %s", path, data, err, want)
						}
						<-time.After(10 * time.Millisecond) // poll the file with a deadline
					}
				}
			}
		})
	}
}
