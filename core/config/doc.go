// Package config is the one registry of the Kafka and isrbench broker settings isrbench
// knows: for each, its name, type, unit, default, allowed range, which side it belongs to
// (topic, broker, client, harness) and whether Kafka can change it at run time (its
// "Dynamic Update Mode": read-only, per-broker, cluster-wide). The typed modes of isrbench's
// own string switches (isrbench.io, isrbench.hw.update, isrbench.truncate.mode) live here
// too, each with its String and Parse.
//
// Settings is one value of those settings (the ones given, else the defaults), parsed and
// range-checked once: a spec or `--set` builds it, and the cluster, the brokers and the
// controller read each setting from it by its Kafka name (Int, Bool, Duration, Text). Every
// user derives from this registry instead of restating it, so a value the registry accepts
// is accepted everywhere, and one it refuses is refused everywhere with an error naming the
// key and the range.
//
// Adding a broker setting: add its Entry to the registry (registry.go), read it from the
// Settings where it is used (a broker's Config.Settings, the cluster's) and, when a workload
// may set it, give it a key with settingB in workloads/spec/params.go; `serve --set`, the
// spec's broker: block and `--set`, DescribeConfigs and the embedded target then take it
// with no other change, and the tests that walk the registry check its minimum, maximum and
// default end to end. Older settings still have typed fields in broker.Config and the
// coordinators' configs; cluster.Config derives them from its Settings in one table
// (cluster/brokerconfig.go).
//
// The package imports nothing of the module (a leaf under core/), so core, netfetch and
// workloads may all import it. Everything in it is immutable after init and safe for
// concurrent use.
package config
