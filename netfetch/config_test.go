package netfetch

import (
	"strings"
	"testing"
)

func TestClusterConfigSet(t *testing.T) {
	cases := []struct {
		kv      string
		wantErr string
		check   func(c ClusterConfig) bool
	}{
		{kv: "min.insync.replicas=2", check: func(c ClusterConfig) bool { return c.Broker.MinInsyncReplicas == 2 }},
		{kv: "num.replica.fetchers=4", check: func(c ClusterConfig) bool { return c.Broker.NumReplicaFetchers == 4 }},
		{kv: "replica.lag.time.max.ms=300", check: func(c ClusterConfig) bool { return c.Broker.ReplicaLagTimeMaxMs == 300 }},
		{kv: "isrbench.zero.copy=false", check: func(c ClusterConfig) bool { return !c.ZeroCopy }},
		{kv: "unclean.leader.election.enable=true", check: func(c ClusterConfig) bool { return c.Controller.UncleanLeaderElectionEnable }},
		{kv: "isrbench.hw.update=mutex", check: func(c ClusterConfig) bool { return c.Broker.HWUpdate == "mutex" }},
		{kv: "isrbench.io=pwritev", check: func(c ClusterConfig) bool {
			return c.Broker.Log.Writer != nil && c.Broker.Log.Writer.Name() == "pwritev"
		}},
		{kv: "isrbench.hw.update=lockfree", wantErr: "not one of atomic, mutex"},
		{kv: "min.insync.replicas=0", wantErr: "outside [1,"},
		{kv: "min.insync.replicas=two", wantErr: "not an integer"},
		{kv: "isrbench.zero.copy=yes", wantErr: "not true or false"},
		{kv: "no.such.key=1", wantErr: "unknown setting \"no.such.key\""},
		{kv: "missing-equals", wantErr: "want key=value"},
	}
	for _, tc := range cases {
		t.Run(tc.kv, func(t *testing.T) {
			c := DefaultClusterConfig()
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
