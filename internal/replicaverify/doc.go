// Package replicaverify checks that the replicas of a partition hold the same log, as Kafka's
// kafka.tools.ReplicaVerificationTool does, against any Kafka-protocol cluster: it fetches
// each partition from every replica with the debugging replica id -2 (which a broker serves
// from its own log, leader or follower, bounded by that replica's high watermark), and
// compares the logs batch by batch (base and last offset, length, leader epoch, stored CRC,
// and each batch's CRC-32C against its bytes) up to each replica's HW. It reports the first
// divergence of each partition (offset, field, the two replicas) and, per replica, its log
// start, HW, LEO and lag behind the leader's LEO.
//
// The comparison (Compare, Cursor) is pure and needs no network; Verify drives it with a
// franz-go client. Memory is bounded by the fetch size times the replicas compared at once.
// Verify is safe for concurrent use as far as its kgo client is.
package replicaverify
