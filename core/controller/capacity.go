package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// checkCapacityLocked refuses adding partition replicas beyond Config.ReplicaCapacity: what
// the file limit of the brokers' process can host (when it is too low for the logs' caches
// of open segment files, each replica may hold one), so that a request the brokers cannot host is refused up front instead of
// leaving them out of file descriptors. what names the request in the error ("create topic
// \"t\""), which wraps kerr.PolicyViolation (Kafka's answer for a request its broker-side
// policy does not allow: not retriable, and clients show its message) and names the bound,
// the replicas hosted and the replicas asked for. c.mu held.
func (c *Controller) checkCapacityLocked(what string, adding int64) error {
	if c.cfg.ReplicaCapacity == nil || adding <= 0 {
		return nil
	}
	limit, why := c.cfg.ReplicaCapacity()
	hosted := c.hostedReplicasLocked()
	if hosted+adding <= limit {
		return nil
	}
	return fmt.Errorf("%s: %d more partition replicas would make %d, but %s lets its brokers host at most %d and they host %d already: raise the file limit (ulimit -n) or ask for fewer partitions: %w",
		what, adding, hosted+adding, why, limit, hosted, kerr.PolicyViolation)
}

// hostedReplicasLocked counts the replicas of every partition of every topic. c.mu held.
func (c *Controller) hostedReplicasLocked() int64 {
	var n int64
	for _, t := range c.mu.topics {
		for i := range t.parts {
			n += int64(len(t.parts[i].Replicas))
		}
	}
	return n
}
