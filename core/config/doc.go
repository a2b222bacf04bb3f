// Package config is the one registry of the Kafka and isrbench broker settings isrbench
// knows: for each, its name, type, unit, default, allowed range, which side it belongs to
// (topic, broker, client, harness) and whether Kafka can change it at run time (its
// "Dynamic Update Mode": read-only, per-broker, cluster-wide). The typed modes of isrbench's
// own string switches (isrbench.io, isrbench.hw.update, isrbench.truncate.mode) live here
// too, each with its String and Parse.
//
// Every user derives from this registry instead of restating it: the broker and partition
// configs take their defaults and lower bounds from it, netfetch its `serve --set` setters
// and the DescribeConfigs definitions, workloads the ranges and help of its broker keys and
// how a kafka:// cluster is given each one. So a value the registry accepts is accepted
// everywhere, and one it refuses is refused everywhere with an error naming the key and the
// range.
//
// Adding a broker setting: add its Entry to the registry (registry.go), bind it to a field in
// netfetch (config.go's bindings) and, when a workload may set it, add its key to
// workloads/spec_params.go with brokerP; the tests that walk the registry then check the new
// entry's minimum, maximum and default end to end.
//
// The package imports nothing of the module (a leaf under core/), so core, netfetch and
// workloads may all import it. Everything in it is immutable after init and safe for
// concurrent use.
package config
