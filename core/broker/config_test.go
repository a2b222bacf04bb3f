package broker

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/config"
)

// TestValidateConfigRegistry: every setting validateConfig checks takes the config
// registry's minimum and maximum and refuses one below the minimum (one above the maximum),
// naming the key and the bound; the typed modes take each of their values.
func TestValidateConfigRegistry(t *testing.T) {
	ints := map[string]func(c *Config, n int64){
		"num.replica.fetchers":             func(c *Config, n int64) { c.NumReplicaFetchers = int(n) },
		"replica.fetch.wait.max.ms":        func(c *Config, n int64) { c.ReplicaFetchWaitMaxMs = int32(n) },
		"replica.fetch.min.bytes":          func(c *Config, n int64) { c.ReplicaFetchMinBytes = int32(n) },
		"replica.fetch.max.bytes":          func(c *Config, n int64) { c.ReplicaFetchMaxBytes = int32(n) },
		"replica.fetch.response.max.bytes": func(c *Config, n int64) { c.ReplicaFetchResponseMaxBytes = int32(n) },
		"replica.fetch.backoff.ms":         func(c *Config, n int64) { c.ReplicaFetchBackoffMs = int32(n) },
		"replica.lag.time.max.ms":          func(c *Config, n int64) { c.ReplicaLagTimeMaxMs = n },
		"min.insync.replicas":              func(c *Config, n int64) { c.MinInsyncReplicas = int(n) },
		// 0 (or less) is the default for these two: only the maximum bounds them.
		"replica.high.watermark.checkpoint.interval.ms": func(c *Config, n int64) { c.ReplicaHighWatermarkCheckpointIntervalMs = n },
		"log.retention.check.interval.ms":               func(c *Config, n int64) { c.LogRetentionCheckIntervalMs = n },
	}
	base := func(t *testing.T) Config {
		c := DefaultConfig()
		c.DataDir = t.TempDir()
		return c
	}
	for name, poke := range ints {
		e := config.Get(name)
		for _, n := range []int64{e.Min, e.Max} {
			c := base(t)
			poke(&c, n)
			if name == "replica.lag.time.max.ms" {
				c.ReplicaFetchWaitMaxMs = int32(min(n, int64(c.ReplicaFetchWaitMaxMs)))
			}
			if name == "replica.fetch.wait.max.ms" {
				c.ReplicaLagTimeMaxMs = max(n, c.ReplicaLagTimeMaxMs)
				c.Settings, _ = c.Settings.With("replica.socket.timeout.ms", strconv.FormatInt(n, 10))
			}
			if err := validateConfig(&c); err != nil {
				t.Errorf("%s=%d (registry %s): %v", name, n, e.Range(), err)
			}
		}
		bad := []int64{e.Min - 1}
		if e.Min <= 1 && strings.HasSuffix(name, ".interval.ms") {
			bad = nil
		}
		if e.Max < math.MaxInt32 || (e.Type == config.Long && e.Max < math.MaxInt64) { // the field holds Max+1
			bad = append(bad, e.Max+1)
		}
		for _, n := range bad {
			c := base(t)
			poke(&c, n)
			err := validateConfig(&c)
			bound := strconv.FormatInt(e.Min, 10)
			if n > e.Max {
				bound = strconv.FormatInt(e.Max, 10)
			}
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), bound) {
				t.Errorf("%s=%d: %v, want an error naming the key and %s", name, n, err, bound)
			}
		}
	}
	for _, m := range config.HWUpdates {
		c := base(t)
		c.HWUpdate = m.String()
		if err := validateConfig(&c); err != nil || c.HWUpdate != m.String() {
			t.Errorf("isrbench.hw.update=%s: %v (%s)", m, err, c.HWUpdate)
		}
	}
	for _, m := range config.TruncateModes {
		c := base(t)
		c.TruncateMode = m.String()
		if err := validateConfig(&c); err != nil || c.TruncateMode != m.String() {
			t.Errorf("isrbench.truncate.mode=%s: %v (%s)", m, err, c.TruncateMode)
		}
	}
	for _, name := range []string{"isrbench.produce.delay", "isrbench.produce.spin"} {
		e := config.Get(name)
		c := base(t)
		if name == "isrbench.produce.delay" {
			c.ProduceDelay = time.Duration(e.Max) + 1
		} else {
			c.ProduceSpin = time.Duration(e.Max) + 1
		}
		if err := validateConfig(&c); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), e.Range()) {
			t.Errorf("%s above %s: %v, want an error naming the key and the range", name, e.Range(), err)
		}
	}
}
