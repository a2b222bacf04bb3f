package cluster

import (
	"net"
	"strconv"
	"testing"
)

// TestListenersBelowEphemeralRange: a listener without a port of its own takes one below the
// kernel's ephemeral range, so the kernel cannot hand it to someone else (a port-0 listener,
// an outgoing connection) while its broker is down and then keep the broker from listening
// on it again.
func TestListenersBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= lowPortMin {
		t.Skipf("ephemeral range starts at %d: no room below it", low)
	}
	seen := map[int]bool{}
	for range 20 {
		ln, err := listenTCP("127.0.0.1", 0)
		if err != nil {
			t.Fatal(err)
		}
		_, ps, _ := net.SplitHostPort(ln.Addr().String())
		p, _ := strconv.Atoi(ps)
		if p < lowPortMin || p >= low || p%10000 >= 9000 {
			t.Errorf("port %d outside [%d, %d) or in a x9xxx block", p, lowPortMin, low)
		}
		seen[p] = true
		defer ln.Close()
	}
	if len(seen) != 20 {
		t.Errorf("20 listeners on %d ports", len(seen))
	}
	// A given port is taken as given.
	ln, err := listenTCP("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, ps, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	p, _ := strconv.Atoi(ps)
	again, err := listenTCP("127.0.0.1", p)
	if err != nil {
		t.Fatalf("listen again on %d: %v", p, err)
	}
	again.Close()
}
