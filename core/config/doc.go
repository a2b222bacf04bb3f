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
// Adding a broker setting: add its Entry to the registry (registry.go) and read it from the
// Settings where it is used; the tests that walk the registry then check the new entry's
// minimum, maximum and default end to end.
//
// The package imports nothing of the module (a leaf under core/), so core, netfetch and
// workloads may all import it. Everything in it is immutable after init and safe for
// concurrent use.
package config
