package netfetch_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestDescribeLogDirsAPI: kadm's DescribeAllLogDirs gets from each broker its data directory
// with every replica it hosts, sized as its segment files, offset lag 0 (Kafka's max(HW -
// LEO, 0) of the replica itself) and the volume's total and usable bytes; a topic set limits
// the replicas; v0 answers too.
func TestDescribeLogDirsAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	for name, rf := range map[string]int16{"ld": 3, "ld-small": 1} {
		if err := c.CreateTopic(name, 2, rf, nil); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.Produce(t, cl, "ld", "v", 50)
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("DescribeAllLogDirs: %d brokers answered, want 3", len(all))
	}
	for _, id := range c.BrokerIDs() {
		dirs := all[id]
		want, err := filepath.Abs(filepath.Join(c.DataDir(), fmt.Sprintf("broker-%d", id)))
		if err != nil {
			t.Fatal(err)
		}
		d, ok := dirs[want]
		if len(dirs) != 1 || !ok || d.Err != nil {
			t.Fatalf("broker %d: dirs %v, want one, %s", id, dirs, want)
		}
		if d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("broker %d: total %d usable %d bytes", id, d.TotalBytes, d.UsableBytes)
		}
		hosted := c.Broker(id).LogDirReplicas()
		n := 0
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { n++ })
		if n != len(hosted) {
			t.Errorf("broker %d: %d replicas described, hosts %d", id, n, len(hosted))
		}
		for _, r := range hosted {
			p, ok := d.Topics.Lookup(r.Topic, r.Partition)
			if !ok || p.Size != r.Size || p.OffsetLag != 0 || p.IsFuture {
				t.Errorf("broker %d %s-%d: described %+v, hosted size %d", id, r.Topic, r.Partition, p, r.Size)
			}
			if r.Topic == "ld" && p.Size == 0 {
				t.Errorf("broker %d %s-%d: size 0 after 50 records", id, r.Topic, r.Partition)
			}
		}
	}
	some, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"ld": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for id, dirs := range some {
		for _, d := range dirs {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.Topic != "ld" || p.Partition != 0 {
					t.Errorf("broker %d: asked for ld-0, described %s-%d", id, p.Topic, p.Partition)
				}
			})
			if _, ok := d.Topics.Lookup("ld", 0); !ok {
				t.Errorf("broker %d: ld-0 not described", id)
			}
		}
	}
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(0)
	resp := rawRequest[*kmsg.DescribeLogDirsResponse](t, c.Addr(0), req)
	if len(resp.Dirs) != 1 || len(resp.Dirs[0].Topics) == 0 {
		t.Errorf("DescribeLogDirs v0 (null topics: all): %+v", resp.Dirs)
	}
}
