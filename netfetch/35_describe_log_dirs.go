package netfetch

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

func init() {
	register(api{key: 35, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeLogDirs(req.(*kmsg.DescribeLogDirsRequest))
	}})
}

// handleDescribeLogDirs answers DescribeLogDirs (kafka-log-dirs.sh --describe) for this
// broker, as Kafka's ReplicaManager.describeLogDirs: its one log directory (log.dirs, the
// absolute path of the broker's data directory) with, per hosted replica the request asks
// for (null topics: every one), the size of its segment files and its offset lag, Kafka's
// max(HW - LEO, 0) of the replica itself (0 on a leader and almost always on a follower: it
// is not the follower's distance to the leader), is_future false (no replica moves between
// directories). v4 adds the volume's total and usable bytes (statfs; -1 when unknown). A log
// directory taken offline by a storage error answers KAFKA_STORAGE_ERROR without replicas.
func (c *conn) handleDescribeLogDirs(req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	b := c.s.cfg.Broker
	dir := b.Config().DataDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir = dir
	if err := b.LogDirOffline(); err != nil {
		rd.ErrorCode = kerr.KafkaStorageError.Code
		resp.Dirs = append(resp.Dirs, rd)
		return resp, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil {
		rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	var want map[string]map[int32]bool // nil: every replica
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if want[t.Topic] == nil {
				want[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	for _, r := range b.LogDirReplicas() { // sorted by topic, then partition
		if want != nil && !want[r.Topic][r.Partition] {
			continue
		}
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != r.Topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = r.Topic
			rd.Topics = append(rd.Topics, rt)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size, rp.OffsetLag = r.Partition, r.Size, r.OffsetLag
		rt := &rd.Topics[len(rd.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Dirs = append(resp.Dirs, rd)
	return resp, nil
}
