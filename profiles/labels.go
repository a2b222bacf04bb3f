package profiles

import (
	"context"
	"runtime/pprof"
)

// pprof label keys set on isrbench goroutines. Core packages set the same
// keys with runtime/pprof directly (they do not import this package).
const (
	LabelBroker = "broker" // broker id, e.g. "1"
	LabelRole   = "role"   // one of the Role* values
)

// Values of LabelRole.
const (
	RoleProduce        = "produce"         // broker: handling a Produce request (append + acks wait)
	RoleFetchServe     = "fetch-serve"     // broker: serving a Fetch (consumer or replica)
	RoleReplicaFetcher = "replica-fetcher" // broker: follower's replica fetcher loop
	RoleISRExpiration  = "isr-expiration"  // broker: ISR shrink checks
	RoleProducerClient = "producer-client" // harness: producer workload
	RoleConsumerClient = "consumer-client" // harness: consumer workload (and consumer-group members)
	RoleObserverClient = "observer-client" // harness: the client HW and LSO observers
	RolePipelineClient = "pipeline-client" // harness: the exactly-once pipeline's members
	RoleProbeClient    = "probe-client"    // harness: the one-at-a-time probe before the load
)

// Labels returns the label set for a broker and role; an empty broker is
// omitted (client roles).
func Labels(broker, role string) pprof.LabelSet {
	if broker == "" {
		return pprof.Labels(LabelRole, role)
	}
	return pprof.Labels(LabelBroker, broker, LabelRole, role)
}

// Do runs fn with the broker and role labels added to ctx's labels (as
// runtime/pprof.Do: goroutines started by fn inherit them). Safe for
// concurrent use.
func Do(ctx context.Context, broker, role string, fn func(context.Context)) {
	pprof.Do(ctx, Labels(broker, role), fn)
}
