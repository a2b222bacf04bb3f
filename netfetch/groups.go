package netfetch

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/group"
)

// The group coordinator's wire files: 08_offset_commit.go, 09_offset_fetch.go,
// 10_find_coordinator.go, 11_join_group.go, 12_heartbeat.go, 13_leave_group.go,
// 14_sync_group.go, 15_describe_groups.go, 16_list_groups.go, 42_delete_groups.go,
// 47_offset_delete.go. They
// translate kmsg requests to core/group's and back; the decisions are core/group's.

// coordinator returns the server's group coordinator, or an error answer when it has none
// (a server without a broker, in tests).
func (c *conn) coordinator() (*group.Coordinator, error) {
	if c.s.groups == nil {
		return nil, kerr.CoordinatorNotAvailable
	}
	return c.s.groups, nil
}

// clientHost is the member's client host as Kafka reports it ("/" + address).
func (c *conn) clientHost() string {
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return "/" + a.IP.String()
	}
	return "/" + c.nc.RemoteAddr().String()
}

func strOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func strPtr(s string) *string { return &s }

// nullIfEmpty is nil for "" (a null string on the wire).
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
