package load

import (
	"context"
	"runtime/pprof"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pprof role labels of the harness's Kafka clients (profiles.Role* name the same values; the
// cost table counts every role ending in "-client" as the clients' CPU).
const (
	roleProducer = "producer-client"
	roleConsumer = "consumer-client"
	roleObserver = "observer-client" // the client HW and LSO observers
	rolePipeline = "pipeline-client"
)

// newClient creates a kgo client whose own goroutines carry the pprof label role=role.
// Goroutines inherit the labels of the goroutine that starts them, and kgo starts its
// metadata loop in NewClient and everything else (broker connections and their response
// readers, the producer's drains and promise callbacks, the consumer's fetch loops) from
// those: without the label their CPU time counted as "other" in the cost table, not as the
// clients'.
func newClient(role string, opts ...kgo.Opt) (cl *kgo.Client, err error) {
	pprof.Do(context.Background(), pprof.Labels("role", role), func(context.Context) {
		cl, err = kgo.NewClient(opts...)
	})
	return cl, err
}
