package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/netfetch"
)

// Each broker's listeners (security.go resolves them): the inter-broker one, whose address
// the broker registers, and the others, served by the same netfetch.Server; every broker's
// address on every listener, for the answers of Metadata on that listener.

// listen opens broker n's listeners: it returns the inter-broker one (the server's own,
// whose address the broker registers) and keeps the others in n.extra. port is the default
// PLAINTEXT listener's port when listeners is not set.
func (c *Cluster) listen(n *node, port int) (net.Listener, error) {
	cs := c.sec
	n.extra = nil
	var primary net.Listener
	for i, l := range cs.listeners {
		p := port
		if len(c.cfg.Security.Listeners) > 0 {
			p = 0
			if l.Port > 0 {
				p = l.Port + int(n.id)
			}
		}
		if prev, ok := cs.port(l.Name, n.id); ok { // a restart: the same port
			_, ps, _ := net.SplitHostPort(prev)
			p, _ = strconv.Atoi(ps)
		}
		ln, err := listenTCP(l.Host, p)
		if err != nil {
			if primary != nil {
				primary.Close()
			}
			for _, e := range n.extra {
				e.Ln.Close()
			}
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		cs.setPort(l.Name, n.id, net.JoinHostPort(l.Host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)))
		if i == 0 {
			primary = ln
			n.host = l.Host
			continue
		}
		name := l.Name
		n.extra = append(n.extra, netfetch.Listener{Name: name, Ln: ln, Security: l.sec,
			Advertise: func(id int32) (string, int32, bool) { return cs.advertise(name, id) }})
	}
	return primary, nil
}

func (cs *clusterSecurity) setPort(listener string, id int32, addr string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.ports[listener] == nil {
		cs.ports[listener] = map[int32]string{}
	}
	cs.ports[listener][id] = addr
}

func (cs *clusterSecurity) port(listener string, id int32) (string, bool) {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	a, ok := cs.ports[listener][id]
	return a, ok
}

func (cs *clusterSecurity) advertise(listener string, id int32) (string, int32, bool) {
	a, ok := cs.port(listener, id)
	if !ok {
		return "", 0, false
	}
	h, p, _ := net.SplitHostPort(a)
	n, _ := strconv.Atoi(p)
	return h, int32(n), true
}

// serverSecurity is what startNode gives broker n's server.
func (c *Cluster) serverSecurity(n *node) (name string, sec netfetch.Security, extra []netfetch.Listener) {
	l := c.sec.listeners[0]
	return l.Name, l.sec, n.extra
}

// ListenerInfo is one listener of the cluster: its name, protocol and bootstrap addresses.
type ListenerInfo struct {
	Name, Protocol string
	Bootstrap      string // host:port of every broker, in id order
	InterBroker    bool
}

// Listeners lists the cluster's listeners, the inter-broker one first.
func (c *Cluster) Listeners() []ListenerInfo {
	var out []ListenerInfo
	for i, l := range c.sec.listeners {
		var addrs []string
		for _, id := range c.ids {
			if a, ok := c.sec.port(l.Name, id); ok {
				addrs = append(addrs, a)
			}
		}
		out = append(out, ListenerInfo{Name: l.Name, Protocol: l.protocol, Bootstrap: strings.Join(addrs, ","), InterBroker: i == 0})
	}
	return out
}
