package target

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/workloads/spec"
)

// ResolveBroker implements execResolver for the embedded cluster.
func (e *embedded) ResolveBroker(_ context.Context, _ string, ref spec.TargetRef) (ExecBroker, error) {
	id, err := e.resolve(ref, true)
	if err != nil {
		return ExecBroker{}, err
	}
	addr := e.c.Addr(id)
	if addr == "" {
		return ExecBroker{}, fmt.Errorf("no broker %d (brokers %v)", id, e.c.BrokerIDs())
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ExecBroker{}, fmt.Errorf("broker %d address %q: %w", id, addr, err)
	}
	p, _ := strconv.Atoi(port)
	return ExecBroker{ID: id, Host: host, Port: p}, nil
}

// GroupStats implements groupStatser: the counters of the broker that coordinates groupID now.
func (e *embedded) GroupStats(groupID string) (group.Stats, bool) {
	for _, id := range e.c.BrokerIDs() {
		if g := e.c.Groups(id); g != nil {
			if st, ok := g.Stats(groupID); ok {
				return st, true
			}
		}
	}
	return group.Stats{}, false
}
