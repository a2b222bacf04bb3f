package broker

// LogDirReplica is one replica in the broker's log directory, as DescribeLogDirs reports it.
type LogDirReplica struct {
	Topic     string
	Partition int32
	// Size is the bytes of the replica's segment files (Kafka's UnifiedLog.size).
	Size int64
	// OffsetLag is Kafka's getLogEndOffsetLag for a current (not future) replica:
	// max(HW - LEO, 0) of this replica's own HW and LEO. A leader's is 0, and so is nearly
	// always a follower's (its HW is at most its LEO): it is not how far the follower trails
	// the leader. A replica whose recovery found its log ending below the HW it had
	// checkpointed (it lost acknowledged records: a power loss without fsync, a deleted
	// segment) counts from that HW: its lag is how many acknowledged records it lost.
	OffsetLag int64
}

// LogDirReplicas returns every replica hosted in the broker's log directory (Config.DataDir,
// Kafka's log.dirs), sorted by topic and partition, with its size and offset lag. Safe for
// concurrent use.
func (b *Broker) LogDirReplicas() []LogDirReplica {
	hs := b.allReplicas()
	out := make([]LogDirReplica, 0, len(hs))
	for _, h := range hs {
		out = append(out, LogDirReplica{
			Topic: h.key.topic, Partition: h.key.partition,
			Size:      h.l.Size(),
			OffsetLag: max(max(h.r.HW(), h.lostHW)-h.r.LEO(), 0),
		})
	}
	return out
}
