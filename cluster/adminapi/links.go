package adminapi

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/netfetch"
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

// errBadLinkParams marks a request whose query parameters are wrong (400).
var errBadLinkParams = errors.New("bad link parameters")

// ParseLinkFault reads the parameters of POST /links/<id>/<action>: slow takes latency and
// jitter (durations, 0..1m) and bandwidth (bytes/s per connection and direction), and needs
// latency or bandwidth; down and heal take none. get returns a parameter's value ("" when
// absent); names lists the parameters given, so that an unknown one is refused.
func ParseLinkFault(action string, names []string, get func(string) string) (netfetch.LinkFault, error) {
	var f netfetch.LinkFault
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
		return netfetch.LinkFault{Down: true}, nil
	case "heal":
		return netfetch.LinkFault{}, nil
	case "slow":
	default:
		return f, fmt.Errorf("%w %q (allowed: %s)", cluster.ErrUnknownAction, action, strings.Join(LinkActions, ", "))
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
