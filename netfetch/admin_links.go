package netfetch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Link faults through the admin API (`isrbench link`), so that a harness run against `isrbench
// serve` from another process (--target kafka://, an exec fault) can slow or cut one broker's
// replica links, as the embedded target's slow-link and partition faults do:
//
//	GET  /links                                   JSON: every faulty link (from, to, fault)
//	POST /links/<id>/slow?latency=D&jitter=D&bandwidth=N
//	                                              latency (+ uniform jitter) per request
//	                                              direction and a bandwidth cap in bytes/s per
//	                                              connection and direction, on every replica
//	                                              link between broker id and the others, both ways
//	POST /links/<id>/down                         no replica traffic between id and the others
//	POST /links/<id>/heal                         those links healthy again
//
// Each POST answers the faulty links after it (as GET /links).

// LinkActions lists the POST /links/<id>/<action> actions.
var LinkActions = []string{"slow", "down", "heal"}

// LinkStatus is one faulty replica link as GET /links reports it.
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
	c.links.mu.Lock()
	keys := make([][2]int32, 0, len(c.links.m))
	for k, l := range c.links.m {
		if l.fault.Load() != nil {
			keys = append(keys, k)
		}
	}
	c.links.mu.Unlock()
	slices.SortFunc(keys, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	out := make([]LinkStatus, 0, len(keys))
	for _, k := range keys {
		f := c.links.get(k[0], k[1]).fault.Load()
		if f == nil {
			continue
		}
		out = append(out, LinkStatus{From: k[0], To: k[1], LatencyMs: f.Latency.Milliseconds(), JitterMs: f.Jitter.Milliseconds(),
			BandwidthBs: f.BandwidthBytesPerSec, Down: f.Down, Fault: describeLinkFault(*f)})
	}
	return out
}

func describeLinkFault(f LinkFault) string {
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

// errBadLinkParams marks a request whose query parameters are wrong (400).
var errBadLinkParams = errors.New("bad link parameters")

// ParseLinkFault reads the parameters of POST /links/<id>/<action>: slow takes latency and
// jitter (durations, 0..1m) and bandwidth (bytes/s per connection and direction), and needs
// latency or bandwidth; down and heal take none. get returns a parameter's value ("" when
// absent); names lists the parameters given, so that an unknown one is refused.
func ParseLinkFault(action string, names []string, get func(string) string) (LinkFault, error) {
	var f LinkFault
	allowed := map[string][]string{"slow": {"latency", "jitter", "bandwidth"}}[action]
	for _, n := range names {
		if !slices.Contains(allowed, n) {
			if len(allowed) == 0 {
				return f, fmt.Errorf("%w: %s takes no parameters, got %q", errBadLinkParams, action, n)
			}
			return f, fmt.Errorf("%w: unknown parameter %q; allowed %s", errBadLinkParams, n, strings.Join(allowed, ", "))
		}
	}
	switch action {
	case "down":
		return LinkFault{Down: true}, nil
	case "heal":
		return LinkFault{}, nil
	case "slow":
	default:
		return f, fmt.Errorf("%w %q (allowed: %s)", errUnknownAction, action, strings.Join(LinkActions, ", "))
	}
	dur := func(name string) (time.Duration, error) {
		v := get(name)
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Minute {
			return 0, fmt.Errorf("%w: %s=%q; allowed a duration 0s..1m, e.g. 250ms", errBadLinkParams, name, v)
		}
		return d, nil
	}
	var err error
	if f.Latency, err = dur("latency"); err != nil {
		return f, err
	}
	if f.Jitter, err = dur("jitter"); err != nil {
		return f, err
	}
	if v := get("bandwidth"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n == math.MaxInt64 {
			return f, fmt.Errorf("%w: bandwidth=%q; allowed bytes/s per connection and direction, an integer >= 0 (0 = unlimited)", errBadLinkParams, v)
		}
		f.BandwidthBytesPerSec = n
	}
	if f.Latency == 0 && f.BandwidthBytesPerSec == 0 {
		return f, fmt.Errorf("%w: slow needs latency or bandwidth", errBadLinkParams)
	}
	if f.Jitter > 0 && f.Latency == 0 {
		return f, fmt.Errorf("%w: jitter without latency; give latency too", errBadLinkParams)
	}
	return f, nil
}

// SetBrokerLinks applies f to every replica link between broker id and the other brokers,
// both directions (the zero LinkFault heals them).
func (c *Cluster) SetBrokerLinks(id int32, f LinkFault) error {
	if _, ok := c.BrokerState(id); !ok {
		return fmt.Errorf("%w: no broker %d (brokers %v)", errUnknownBroker, id, c.ids)
	}
	for _, o := range c.ids {
		if o != id {
			c.SetLink(id, o, f)
			c.SetLink(o, id, f)
		}
	}
	return nil
}
