package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/isrbench/isrbench/netfetch"
)

// The brokers' states and the actions on them and on their links, which the admin API
// (cluster/adminapi) serves over HTTP.

// Actions lists the actions Act applies to a broker (the admin API's POST
// /brokers/<id>/<action>).
var Actions = []string{"stop", "kill", "crash", "pause", "resume", "start"}

// BrokerStatus is one broker's state, as the admin API's GET /brokers reports it (a value).
type BrokerStatus struct {
	ID    int32  `json:"id"`
	Addr  string `json:"addr"`
	State string `json:"state"` // running | paused | stopped
	// Fenced is the controller's view: a stopped or paused broker stays unfenced until its
	// session expires (kill, pause) or is fenced at once (stop, crash).
	Fenced bool `json:"fenced"`
	// Leads lists the partitions it leads now, as "topic-partition".
	Leads []string `json:"leads"`
}

// BrokerState returns broker id's state: running, paused or stopped (killed, crashed or
// stopped through the admin API), and false for an unknown id.
func (c *Cluster) BrokerState(id int32) (string, bool) {
	n := c.nodes[id]
	if n == nil {
		return "", false
	}
	switch n.state.Load() {
	case nodePaused:
		return "paused", true
	case nodeStopped:
		return "stopped", true
	}
	return "running", true
}

// Statuses returns every broker's status in id order.
func (c *Cluster) Statuses() []BrokerStatus {
	out := make([]BrokerStatus, 0, len(c.ids))
	for _, id := range c.ids {
		st, _ := c.BrokerState(id)
		bs := BrokerStatus{ID: id, Addr: c.Addr(id), State: st, Leads: []string{}}
		if info, ok := c.ctrl.Broker(id); ok {
			bs.Fenced = !info.Alive
		}
		for _, t := range c.ctrl.Topics() {
			parts, _ := c.ctrl.Partitions(t)
			for _, p := range parts {
				if p.Leader == id {
					bs.Leads = append(bs.Leads, fmt.Sprintf("%s-%d", t, p.Partition))
				}
			}
		}
		out = append(out, bs)
	}
	return out
}

// Act applies an admin action (one of Actions) to broker id and returns once every
// running broker has applied the partition changes it caused (new leaders, smaller ISRs), so
// that a describe right after it shows them.
func (c *Cluster) Act(id int32, action string) error {
	if err := c.act(id, action); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range c.ids {
		if st, _ := c.BrokerState(b); st != "running" {
			continue // a paused broker applies nothing until it resumes
		}
		if err := c.ctrl.Sync(ctx, b); err != nil {
			return fmt.Errorf("netfetch: broker %d %s done, but broker %d did not apply its partition changes: %w", id, action, b, err)
		}
	}
	return nil
}

func (c *Cluster) act(id int32, action string) error {
	if _, ok := c.BrokerState(id); !ok {
		return fmt.Errorf("%w: no broker %d (brokers %v)", ErrUnknownBroker, id, c.ids)
	}
	switch action {
	case "stop":
		return c.KillBroker(id)
	case "kill":
		return c.KillBrokerAwaitSession(id)
	case "crash":
		return c.CrashBrokerAwaitSession(id)
	case "pause":
		return c.PauseBroker(id)
	case "resume":
		return c.ResumeBroker(id)
	case "start":
		if st, _ := c.BrokerState(id); st != "stopped" {
			return fmt.Errorf("netfetch: broker %d is %s, not stopped: nothing to start", id, st)
		}
		return c.RestartBroker(id)
	}
	return fmt.Errorf("%w %q (allowed: %s)", ErrUnknownAction, action, strings.Join(Actions, ", "))
}

// ErrUnknownBroker and ErrUnknownAction mark the errors of Act and SetBrokerLinks for a
// broker id the cluster does not have and for an action not in Actions.
var (
	ErrUnknownBroker = errors.New("unknown broker")
	ErrUnknownAction = errors.New("unknown action")
)

// LinkStatus is one faulty replica link, as the admin API's GET /links reports it (a value).
type LinkStatus struct {
	From        int32  `json:"from"` // the source (leader) serving the data
	To          int32  `json:"to"`   // the follower fetching it
	LatencyMs   int64  `json:"latency_ms"`
	JitterMs    int64  `json:"jitter_ms"`
	BandwidthBs int64  `json:"bandwidth_bytes_per_sec"`
	Down        bool   `json:"down"`
	Fault       string `json:"fault"` // as text: "latency 250ms jitter 10ms bandwidth 6000000 B/s", "down"
}

// Links returns every replica link with a fault, by (from, to).
func (c *Cluster) Links() []LinkStatus {
	faulty := c.links.Faulty()
	out := make([]LinkStatus, 0, len(faulty))
	for _, l := range faulty {
		f := l.Fault
		out = append(out, LinkStatus{From: l.From, To: l.To, LatencyMs: f.Latency.Milliseconds(), JitterMs: f.Jitter.Milliseconds(),
			BandwidthBs: f.BandwidthBytesPerSec, Down: f.Down, Fault: describeLinkFault(f)})
	}
	return out
}

func describeLinkFault(f netfetch.LinkFault) string {
	if f.Down {
		return "down"
	}
	var parts []string
	if f.Latency > 0 {
		parts = append(parts, "latency "+f.Latency.String())
	}
	if f.Jitter > 0 {
		parts = append(parts, "jitter "+f.Jitter.String())
	}
	if f.BandwidthBytesPerSec > 0 {
		parts = append(parts, fmt.Sprintf("bandwidth %d B/s", f.BandwidthBytesPerSec))
	}
	return strings.Join(parts, " ")
}

// SetBrokerLinks applies f to every replica link between broker id and the other brokers,
// both directions (the zero LinkFault heals them).
func (c *Cluster) SetBrokerLinks(id int32, f netfetch.LinkFault) error {
	if _, ok := c.BrokerState(id); !ok {
		return fmt.Errorf("%w: no broker %d (brokers %v)", ErrUnknownBroker, id, c.ids)
	}
	for _, o := range c.ids {
		if o != id {
			c.SetLink(id, o, f)
			c.SetLink(o, id, f)
		}
	}
	return nil
}
