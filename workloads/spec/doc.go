// Package spec is the workload language of the isrbench harness: the Spec value, its YAML
// form, the flat keys that --set and --vary take, the fault schedule, the sweep axes and the
// specs embedded in the binary (package specs). It runs nothing: targets, load and the runner
// build on it, and it imports none of them.
//
// A workload is YAML (specs/*.yaml are embedded: `-w default` and
// `-w workloads/specs/default.yaml` both work). Keys are Kafka's names:
//
//	name: default
//	brokers: 3
//	topic: {name: isrbench, partitions: 6, replication.factor: 3, min.insync.replicas: 2}
//	broker: {num.replica.fetchers: 1, replica.fetch.wait.max.ms: 500, ...}
//	producers: {count: 2, acks: all, message.size: 1024, rate: 5000, linger.ms: 0, batch.size: 16384, keys: none}
//	consumers: {count: 1}
//	duration: 20s
//	warmup: 5s
//	faults: [{at: 2s, duration: 5s, kind: pause-broker, target: follower-of:isrbench-0}]
//	sweep: {num.replica.fetchers: [1, 2, 4]}
//
// Every setting has a flat key (Keys, KeyHelp): broker properties under their bare Kafka name
// ("num.replica.fetchers", also "broker.num.replica.fetchers"), the rest under their YAML
// path ("topic.partitions", "producers.rate") with short aliases where unambiguous
// ("partitions", "acks", "rate", "linger.ms", ...). `--set key=value` overrides one,
// `--vary key=v1,v2` sweeps one (ParseVary, Points), and Spec.Config() reports every
// effective setting under its canonical key in result.json. Parsing walks the YAML tree
// itself (a stricter KnownFields): an unknown key, a wrong type or an out-of-range value is
// an error naming the key, its line and the allowed values. The broker: block's settings
// (but isrbench.min.free.disk and security.inter.broker.protocol, the harness's) are kept in
// Spec.Settings, checked by the core/config registry; the embedded target hands that value
// to the cluster unchanged.
//
// rate is the total over all producers (split evenly, their schedules interleaved); rate 0 is a
// closed loop as fast as the client's buffer (max.buffered.records) allows. producers may be
// a list of groups ({count, acks, rate, ...} each, rate per group); the flat producers.* keys
// set the first group (ProducerGroups).
//
// Transactions (txn.go): producers.transactional.id (a prefix, producer n uses <prefix>-n),
// producers.transaction.records, producers.transaction.abort.ratio,
// consumers.isolation.level and the exactly-once pipeline (pipeline: {enabled, output.topic,
// ...}); a transactional id needs acks=all and idempotence, as Kafka's producer requires.
//
// faults is a schedule of {at, duration, kind, target, partition, fence, latency, jitter,
// bandwidth, command, undo, timeout, to, add}; at is relative to the start of measurement.
// Kinds are FaultKinds (pause, kill, restart, crash are accepted as aliases); a kafka://
// target takes ExternalFaultKinds only (CheckTarget). A fault's target is a broker id,
// leader-of:TOPIC-PARTITION, follower-of:TOPIC-PARTITION, any-follower, leader or follower
// (ParseFaultTarget); roles are resolved by the target when the fault starts. A
// restart-producer fault's target is a transactional producer's number (ParseProducerTarget).
//
// A Spec is a plain value, not safe for concurrent mutation; a validated Spec may be read from
// any goroutine.
package spec
