package cluster

import (
	"errors"
	"fmt"

	"github.com/isrbench/isrbench/netfetch"
)

// The faults a Cluster injects into its brokers and links (kill, crash, restart, pause, link faults).

// KillBroker stops broker id abruptly (like kill -9): its listener and
// connections close, the broker stops without checkpoints, and the
// controller fences it immediately (BrokerDown). A real Kafka controller
// would notice only after broker.session.timeout.ms; KillBrokerAwaitSession
// models that.
func (c *Cluster) KillBroker(id int32) error { return c.stopBroker(id, false, true) }

// KillBrokerAwaitSession is KillBroker without the immediate fencing: the
// controller fences the broker when its session expires
// (broker.session.timeout.ms after the last heartbeat).
func (c *Cluster) KillBrokerAwaitSession(id int32) error { return c.stopBroker(id, false, false) }

// CrashBroker is KillBroker plus a simulated power loss: every segment loses
// what was not fsynced (broker.Crash).
func (c *Cluster) CrashBroker(id int32) error { return c.stopBroker(id, true, true) }

// CrashBrokerAwaitSession is CrashBroker without the immediate fencing: the
// controller fences the broker when its session expires (as
// KillBrokerAwaitSession).
func (c *Cluster) CrashBrokerAwaitSession(id int32) error { return c.stopBroker(id, true, false) }

func (c *Cluster) stopBroker(id int32, crash, fence bool) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	n, err := c.openNode(id)
	if err != nil {
		return err
	}
	if n.state.Load() == nodeStopped {
		return fmt.Errorf("cluster: broker %d is already stopped", id)
	}
	n.state.Store(nodeStopped)
	b := n.stopServing()
	if crash {
		if err := b.Crash(); err != nil {
			c.logf("cluster: %v", err)
		}
	} else {
		b.Kill()
	}
	if fence {
		c.ctrl.BrokerDown(id)
	}
	return nil
}

// openNode returns broker id's node while the cluster is open; c.opMu held.
func (c *Cluster) openNode(id int32) (*node, error) {
	if c.closed {
		return nil, errors.New("cluster: cluster closed")
	}
	return c.node(id)
}

// RestartBroker starts a new broker on a stopped broker's data directory
// and port: its logs are recovered and it registers as a new incarnation (a new
// broker epoch), so it leads nothing and is in no ISR until it has caught up
// (controller.RegisterBroker). A running broker is closed cleanly first.
func (c *Cluster) RestartBroker(id int32) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	n, err := c.openNode(id)
	if err != nil {
		return err
	}
	if n.state.Load() != nodeStopped {
		n.state.Store(nodeStopped)
		if err := n.stopServing().Close(); err != nil {
			return fmt.Errorf("cluster: broker %d clean stop before restart: %w", id, err)
		}
	}
	ln, err := c.listen(n, n.port)
	if err != nil {
		return fmt.Errorf("cluster: broker %d listen again on port %d: %w", id, n.port, err)
	}
	return c.startNode(n, ln)
}

// PauseBroker freezes broker id like SIGSTOP: it stops fetching and
// heartbeating, and its server stops reading and answering requests while
// connections stay open. The controller fences it after
// broker.session.timeout.ms; followers fall out of ISRs after
// replica.lag.time.max.ms.
func (c *Cluster) PauseBroker(id int32) error {
	return c.setPaused(id, true)
}

// ResumeBroker undoes PauseBroker (heartbeats resume; a broker fenced by
// its expired session is unfenced by its next heartbeat).
func (c *Cluster) ResumeBroker(id int32) error {
	return c.setPaused(id, false)
}

// setPaused moves broker id between running and paused. Pausing stops the
// server first (no request answered), then the broker's fetchers and
// heartbeats; resuming goes the other way round.
func (c *Cluster) setPaused(id int32, pause bool) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	n, err := c.node(id)
	if err != nil {
		return err
	}
	from, to, want := nodeRunning, nodePaused, "running"
	if !pause {
		from, to, want = nodePaused, nodeRunning, "paused"
	}
	if !n.state.CompareAndSwap(from, to) {
		return fmt.Errorf("cluster: broker %d is not %s", id, want)
	}
	if pause {
		n.srv.Load().Pause()
		n.b.Load().Pause()
	} else {
		n.b.Load().Resume()
		n.srv.Load().Resume()
	}
	return nil
}

// SetLink injects a fault on the replica link from broker from (the
// source/leader serving the data) to broker to (the follower fetching it):
// latency, jitter, a bandwidth cap, or a partition (Down). The zero
// LinkFault heals it. Switching between healthy and faulty closes that
// link's fetch connections, which the follower re-dials
// (replica.fetch.backoff.ms later).
func (c *Cluster) SetLink(from, to int32, l netfetch.LinkFault) { c.links.Set(from, to, l) }
