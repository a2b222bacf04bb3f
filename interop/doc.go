// Package interop runs Kafka clients that isrbench does not ship against its embedded
// cluster: kcat (librdkafka), confluent-kafka-python, kafka-python, kafkajs, IBM sarama and
// segmentio/kafka-go. It is its own Go module so that the main module does not depend on
// sarama or kafka-go.
//
// Each client, in its own processes (or fresh Go clients), produces with acks=all, consumes
// as a member of a group, commits, stops, and resumes from the committed offsets (it must
// read exactly the records produced after the commit), deletes the records of a partition
// below its high watermark and describes the log directories where the suite has those steps
// for the client (sarama's ClusterAdmin; the others show n/a), and deletes the topic (kcat, which
// has no admin commands, checks with -L that a kadm deletion is seen); the topic must then
// be gone from the controller and every broker. admin_test.go adds the admin operations:
// a partition reassignment (45/46), DescribeConfigs and a group's committed offsets, through
// sarama's ClusterAdmin, kafkajs' admin (js/admin.js, which also deletes records for the
// suite) and confluent-kafka-python's AdminClient (python/confluent_admin.py), n/a where the
// installed version lacks the call. kcat also runs two -G members in
// one group and checks the rebalance when one leaves. security_test.go runs the suite again
// against a SASL_SSL listener (kcat, confluent-kafka-python and kafka-python with
// SCRAM-SHA-512, kafkajs with SCRAM-SHA-256, sarama with PLAIN). TestMain prints the client x
// operation table.
//
// A client that is not installed skips its test, unless ISRBENCH_REQUIRE_INTEROP=1 (CI sets
// it): then it is a failure. The external clients: kcat on PATH, /usr/bin/python3 (or
// ISRBENCH_PYTHON) with the Debian packages python3-confluent-kafka and python3-kafka, and
// node with js/node_modules installed by `npm ci` in interop/js.
package interop
