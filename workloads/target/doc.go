// Package target is the cluster an isrbench run drives: the embedded replicating core
// (cluster.Cluster in this process, with every fault kind), franz-go's kfake (a reference
// without replication) or any Kafka-protocol cluster at kafka://host:port. OpenTarget starts
// or connects to one; Inspect returns its optional parts (partition sampling, healing, replica
// logs, exec fault targets, ...).
//
// On a kafka:// target the spec's settings are applied the way Kafka lets a client change
// them (ConfigSession): topic configs at creation, cluster-wide dynamic broker configs by
// IncrementalAlterConfigs (restored at the end), read-only ones checked against
// DescribeConfigs or assumed (ParseAssume). ClusterConfig maps a spec onto the embedded
// cluster's configuration. The client security of the target block (spec.Spec.Client) becomes
// the clients' options (ClientSecurity, ClientOpts).
//
// A Target is called from the runner's goroutine, except Sample and the sampler, which the
// timelines call from their own; see each interface.
package target
