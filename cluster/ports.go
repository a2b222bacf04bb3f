package cluster

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A broker that is stopped and started again listens on its old port (clients and the other
// brokers know it). Had the kernel picked that port (port 0), it could hand it out again
// while the broker is down: to another listener bound to port 0, or as the local port of an
// outgoing connection, and on a busy machine (tests of several packages at once) it does. So a
// listener without a port of its own takes a free one below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands out by itself.

// lowPortMin is the lowest port chosen; ports below it are left to services.
const lowPortMin = 10000

// listenTCP listens on host:port, or, for port 0, on a free port below the ephemeral range
// (the kernel's choice when no such port is free).
func listenTCP(host string, port int) (net.Listener, error) {
	if port != 0 {
		return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	if hi := ephemeralLow(); hi > lowPortMin {
		for range 64 {
			p := lowPortMin + rand.IntN(hi-lowPortMin)
			if p%10000 >= 9000 {
				continue // 19092, 29092 ...: where Kafka listeners are usually put by hand
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err == nil {
				return ln, nil
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				break
			}
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// ephemeralLow is the lowest port of the kernel's ephemeral range (0 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
