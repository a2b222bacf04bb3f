package cluster

import (
	"strings"
	"testing"
	"time"
)

func TestClusterConfigSet(t *testing.T) {
	cases := []struct {
		kv      string
		wantErr string
		check   func(c Config) bool
	}{
		{kv: "min.insync.replicas=2", check: func(c Config) bool { return c.Broker.MinInsyncReplicas == 2 }},
		{kv: "num.replica.fetchers=4", check: func(c Config) bool { return c.Broker.NumReplicaFetchers == 4 }},
		{kv: "replica.lag.time.max.ms=300", check: func(c Config) bool { return c.Broker.ReplicaLagTimeMaxMs == 300 }},
		{kv: "isrbench.zero.copy=false", check: func(c Config) bool { return !c.ZeroCopy }},
		{kv: "unclean.leader.election.enable=true", check: func(c Config) bool { return c.Controller.UncleanLeaderElectionEnable }},
		{kv: "isrbench.hw.update=mutex", check: func(c Config) bool { return c.Broker.HWUpdate == "mutex" }},
		{kv: "isrbench.io=pwritev", check: func(c Config) bool {
			return c.Broker.Log.Writer != nil && c.Broker.Log.Writer.Name() == "pwritev"
		}},
		{kv: "isrbench.hw.update=lockfree", wantErr: "isrbench.hw.update: \"lockfree\" is not allowed; allowed atomic|mutex"},
		{kv: "min.insync.replicas=0", wantErr: "min.insync.replicas: 0 is out of range; allowed 1.."},
		{kv: "min.insync.replicas=two", wantErr: "not an integer"},
		{kv: "isrbench.zero.copy=yes", wantErr: "not true or false"},
		{kv: "no.such.key=1", wantErr: "unknown setting \"no.such.key\""},
		{kv: "missing-equals", wantErr: "want key=value"},
		{kv: "max.connections=100", check: func(c Config) bool { return c.Limits.MaxConnections == 100 }},
		{kv: "max.connections=0", wantErr: "max.connections: 0 is out of range; allowed 1..2147483647"},
		{kv: "max.connections.per.ip=4", check: func(c Config) bool { return c.Limits.MaxConnectionsPerIP == 4 }},
		{kv: "connections.max.idle.ms=-1", check: func(c Config) bool { return c.Limits.ConnectionsMaxIdle < 0 }},
		{kv: "connections.max.idle.ms=1500", check: func(c Config) bool { return c.Limits.ConnectionsMaxIdle == 1500*time.Millisecond }},
		{kv: "connections.max.idle.ms=0", wantErr: "connections.max.idle.ms: 0 is out of range; allowed -1 or 1.."},
		{kv: "isrbench.request.read.timeout.ms=250", check: func(c Config) bool { return c.Limits.RequestReadTimeout == 250*time.Millisecond }},
		{kv: "isrbench.request.read.timeout.ms=-2", wantErr: "allowed -1 or 1.."},
		{kv: "queued.max.request.bytes=-1", check: func(c Config) bool { return c.Limits.QueuedMaxRequestBytes == -1 && c.Check() == nil }},
		{kv: "queued.max.request.bytes=0", wantErr: "queued.max.request.bytes: 0 is out of range; allowed -1 or 1.."},
	}
	for _, tc := range cases {
		t.Run(tc.kv, func(t *testing.T) {
			c := DefaultConfig()
			err := c.SetKV(tc.kv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetKV(%q) = %v, want error containing %q", tc.kv, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("SetKV(%q) did not apply: %+v", tc.kv, c)
			}
		})
	}
}

// TestClusterConfigCheck: queued.max.request.bytes must be -1 or at least
// socket.request.max.bytes (Kafka's rule), whatever order they are set in.
func TestClusterConfigCheck(t *testing.T) {
	c := DefaultConfig()
	for _, kv := range []string{"queued.max.request.bytes=1048576", "socket.request.max.bytes=1048576"} {
		if err := c.SetKV(kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Check(); err != nil {
		t.Fatalf("equal sizes: %v", err)
	}
	if err := c.SetKV("socket.request.max.bytes=2097152"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "queued.max.request.bytes 1048576 is smaller than socket.request.max.bytes 2097152") {
		t.Fatalf("Check = %v", err)
	}
}
