package spec

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// CheckTarget checks a target name against the spec before anything runs: "embedded" (or
// "") gives nil hosts; "kafka://host:port[,host:port]" its hosts, each host:port with a port
// in 1..65535, and only for a spec whose faults are all of ExternalFaultKinds (exec: a
// kafka:// cluster cannot be paused or killed from inside this process).
func CheckTarget(name string, s *Spec) ([]string, error) {
	switch {
	case name == "" || name == "embedded":
		return nil, nil
	case name == "kfake":
		if s != nil && len(s.Faults) > 0 {
			return nil, fmt.Errorf("target kfake: the spec %s has %d faults, which need the embedded target (kfake has no brokers to pause or kill)", s.Name, len(s.Faults))
		}
		return nil, nil
	case strings.HasPrefix(name, "kafka://"):
		hosts := SplitList(strings.TrimPrefix(name, "kafka://"))
		if len(hosts) == 0 {
			return nil, fmt.Errorf("target %q: want kafka://host:port[,host:port]", name)
		}
		for _, h := range hosts {
			host, port, err := net.SplitHostPort(h)
			if err != nil || host == "" {
				return nil, fmt.Errorf("target %q: %q is not host:port", name, h)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("target %q: %q: port %q is not a number in 1..65535", name, h, port)
			}
		}
		if s != nil {
			if n := EmbeddedOnlyFaults(s); n > 0 {
				return nil, fmt.Errorf("target %q: the spec %s has %d faults of kinds that need the embedded target (%s act on its brokers from inside the process); on a kafka:// cluster use kind exec with a command that does it (docker compose stop/pause, kubectl, tc; see workloads/specs/compose), or --target embedded",
					name, s.Name, n, strings.Join(EmbeddedFaultKinds(), ", "))
			}
		}
		return hosts, nil
	}
	return nil, fmt.Errorf("target %q: allowed embedded, kfake or kafka://host:port[,host:port]", name)
}

// EmbeddedFaultKinds are the fault kinds only the embedded target applies.
func EmbeddedFaultKinds() []string {
	var out []string
	for _, k := range FaultKinds {
		if !slices.Contains(ExternalFaultKinds, k) {
			out = append(out, k)
		}
	}
	return out
}

// EmbeddedOnlyFaults counts the spec's faults that only the embedded target can apply.
func EmbeddedOnlyFaults(s *Spec) int {
	n := 0
	for _, f := range s.Faults {
		if !slices.Contains(ExternalFaultKinds, f.Kind) {
			n++
		}
	}
	return n
}
