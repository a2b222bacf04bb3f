// Package kafkatool holds what isrbench's Kafka admin commands do once their flags are
// checked: `isrbench topics` (kafka-topics.sh --describe / --create / --alter / --delete),
// `isrbench configs` (kafka-configs.sh --describe / --alter), `isrbench reassign`
// (kafka-reassign-partitions.sh --generate / --execute / --verify / --cancel / --list,
// reassign.go), `isrbench groups` (kafka-consumer-groups.sh), `isrbench delete-records`
// (kafka-delete-records.sh) and `isrbench log-dirs` (kafka-log-dirs.sh --describe), against
// any Kafka cluster through a franz-go kadm client, printing what Kafka's tools print.
//
// Errors name the command ("topics: …", "configs: …", "groups: …") and carry the broker's
// error message when it sent one. The functions are safe for concurrent use as far as the kadm client is.
package kafkatool
