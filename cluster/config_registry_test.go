package cluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// TestSettersCoverRegistry: Set accepts every registry entry that is not Fixed, under its
// name, and records it in Settings; the typed fields DescribeConfigs reads have the
// registry's type and default, and the registry's update mode agrees with the controller's
// dynamic broker configs.
func TestSettersCoverRegistry(t *testing.T) {
	for _, e := range config.Entries() {
		c := DefaultConfig()
		if err := c.Set(e.Name, e.Default); (err != nil) != e.Fixed {
			t.Errorf("%s=%s (Fixed %v): %v", e.Name, e.Default, e.Fixed, err)
		}
		if !e.Fixed && (!c.Settings.IsSet(e.Name) || c.staticBrokerConfigs(0, "")[e.Name] == "" && e.Default != "") {
			t.Errorf("%s: Set does not record it in Settings, or DescribeConfigs does not report it", e.Name)
		}
	}
	for _, k := range SettableKeys() {
		if _, ok := config.Lookup(brokerConfigName(k)); !ok {
			t.Errorf("setting %s: not in the registry", k)
		}
	}
	// Every typed field agrees with Settings after Set, for every sample of its setting: Set
	// derives the field (load), and Start reads it back (text) as the same value.
	for _, b := range bindings {
		e, ok := config.Lookup(b.name)
		if !ok || e.Fixed {
			t.Errorf("binding %s: not a settable registry entry", b.name)
			continue
		}
		for _, v := range e.Samples() {
			c := DefaultConfig()
			if err := c.Set(b.name, v); err != nil {
				t.Fatalf("Set(%s, %s): %v", b.name, v, err)
			}
			if got := b.text(&c); got != c.Settings.Text(b.name) && !(v == "0" && b.zero != nil) {
				t.Errorf("%s=%s: the typed field reads back as %s", b.name, v, got)
			}
		}
	}
	for _, n := range controller.DynamicBrokerConfigNames() {
		if e := config.Get(n); e.Update == config.ReadOnly {
			t.Errorf("%s: dynamic in the controller, read-only in the registry", n)
		}
	}
	// The defaults of DefaultClusterConfig are the registry's, but for isrbench's own
	// default.replication.factor (min(3, brokers)).
	c := DefaultConfig()
	if err := c.readFields(); err != nil {
		t.Fatal(err)
	}
	for name, v := range c.staticBrokerConfigs(0, "") {
		switch name {
		case "default.replication.factor", "queued.max.request.bytes", "log.dirs", "broker.id":
			// isrbench's own defaults: min(3, brokers); 104857600 (Kafka's -1, unbounded); per broker
		default:
			t.Errorf("DefaultClusterConfig: %s=%s, registry default %q", name, v, config.Get(name).Default)
		}
	}
}

// related sets the settings Kafka's rules tie to name=v so that a value the registry
// accepts is tried with others that allow it: replica.fetch.wait.max.ms <=
// replica.lag.time.max.ms and <= replica.socket.timeout.ms (KafkaConfig), queued.max.request.bytes >=
// socket.request.max.bytes (SocketServer), group.min.session.timeout.ms <=
// group.max.session.timeout.ms.
func related(t *testing.T, c *Config, name string, n int64) {
	t.Helper()
	set := func(k string, v int64) {
		if err := c.Set(k, strconv.FormatInt(v, 10)); err != nil {
			t.Fatal(err)
		}
	}
	switch name {
	case "replica.lag.time.max.ms", "replica.socket.timeout.ms":
		set("replica.fetch.wait.max.ms", min(n, int64(c.Broker.ReplicaFetchWaitMaxMs)))
	case "replica.fetch.wait.max.ms":
		set("replica.lag.time.max.ms", max(n, c.Broker.ReplicaLagTimeMaxMs))
		set("replica.socket.timeout.ms", max(n, c.Settings.Int("replica.socket.timeout.ms")))
	case "socket.request.max.bytes":
		set("queued.max.request.bytes", -1)
	case "queued.max.request.bytes":
		if n != -1 {
			set("socket.request.max.bytes", min(n, int64(c.SocketRequestMaxBytes)))
		}
	case "group.min.session.timeout.ms":
		set("group.max.session.timeout.ms", max(n, int64(c.Group.MaxSessionTimeoutMs)))
	case "group.max.session.timeout.ms":
		set("group.min.session.timeout.ms", min(n, int64(c.Group.MinSessionTimeoutMs)))
	}
}

// zeroIsDefault lists the Config fields where 0 (or less) means "the default"
// (documented on the fields): one below the minimum set in Go starts the cluster with the
// default.
var zeroIsDefault = []string{
	"broker.session.timeout.ms", "default.replication.factor", "leader.imbalance.check.interval.seconds",
	"leader.replication.throttled.rate", "follower.replication.throttled.rate",
	"log.retention.check.interval.ms", "max.connections", "max.connections.per.ip",
	"num.partitions", "replica.high.watermark.checkpoint.interval.ms", "socket.request.max.bytes",
	"isrbench.log.scrub.bytes.per.second", "isrbench.log.scrub.interval.ms", "queued.max.request.bytes",
	// core/txn.Config: zero fields take Kafka's defaults
	"transaction.state.log.num.partitions", "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
	"transaction.max.timeout.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
}

// TestRegistryWalk walks every registry entry: its minimum, maximum and default (every mode,
// both booleans) pass Set and start a cluster that reports the value through DescribeConfigs'
// definitions; one below the minimum fails Set with an error naming the key and the range,
// and, stored in Go, fails StartCluster naming the key.
func TestRegistryWalk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(c Config) error {
		c.Brokers = 1
		cl, err := Start(ctx, c)
		if err == nil {
			err = cl.Close()
		}
		return err
	}
	for _, e := range config.Entries() {
		if e.Fixed {
			continue
		}
		t.Run(e.Name, func(t *testing.T) {
			for _, v := range e.Samples() {
				c := DefaultConfig()
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					related(t, &c, e.Name, n)
				}
				if err := c.Set(e.Name, v); err != nil {
					t.Fatalf("Set(%s, %s): %v", e.Name, v, err)
				}
				if err := c.Check(); err != nil {
					t.Fatalf("%s=%s: Check: %v", e.Name, v, err)
				}
				if got := c.staticBrokerConfigs(0, "")[e.Name]; got != v && !(v == "0" && slices.Contains(zeroIsDefault, e.Name)) {
					t.Errorf("%s=%s: DescribeConfigs would report %s", e.Name, v, got)
				}
				if err := start(c); err != nil {
					t.Fatalf("%s=%s: StartCluster: %v", e.Name, v, err)
				}
			}
			if !e.Type.Numeric() {
				bad := DefaultConfig()
				if err := bad.Set(e.Name, "-2x"); err == nil || !strings.Contains(err.Error(), e.Name) {
					t.Errorf("Set(%s, -2x): %v, want an error naming the key", e.Name, err)
				}
				return
			}
			below := e.Min - 1
			if e.Never && below == -1 {
				below = -2
			}
			c := DefaultConfig()
			err := c.Set(e.Name, strconv.FormatInt(below, 10))
			if err == nil || !strings.Contains(err.Error(), e.Name) || !strings.Contains(err.Error(), strconv.FormatInt(e.Min, 10)) {
				t.Errorf("Set(%s, %d): %v, want an error naming the key and the minimum %d", e.Name, below, err, e.Min)
			}
			c = DefaultConfig()
			if !storeInt(&c, e.Name, below) {
				return // no integer field: Set alone
			}
			err = start(c)
			if below <= 0 && slices.Contains(zeroIsDefault, e.Name) {
				if err != nil {
					t.Errorf("%s=0 stored in Go (the default): StartCluster: %v", e.Name, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), e.Name) {
				t.Errorf("%s=%d stored in Go: StartCluster: %v, want an error naming the key", e.Name, below, err)
			}
		})
	}
}

// TestIOModesAreWriters: every isrbench.io mode of the registry names a log writer.
func TestIOModesAreWriters(t *testing.T) {
	for _, m := range config.IOs {
		w, err := log.NewWriter(m.String())
		if err != nil {
			t.Errorf("isrbench.io=%s: %v", m, err)
			continue
		}
		if w.Name() != m.String() && w.Name() != config.IOPwritev.String() { // uring may fall back
			t.Errorf("isrbench.io=%s: writer %s", m, w.Name())
		}
	}
}

// TestDynamicConfigsTakeRegistryRanges: AlterConfigs of a dynamic broker config (the
// controller's check) takes the registry's samples of it and refuses one below its minimum.
func TestDynamicConfigsTakeRegistryRanges(t *testing.T) {
	for _, n := range controller.DynamicBrokerConfigNames() {
		e := config.Get(n)
		if e.Fixed {
			if _, err := controller.ValidateBrokerConfig(n, e.Default); err != nil {
				t.Errorf("%s=%s (its only value): %v", n, e.Default, err)
			}
			continue
		}
		for _, v := range e.Samples() {
			if _, err := controller.ValidateBrokerConfig(n, v); err != nil {
				t.Errorf("%s=%s (registry %s): %v", n, v, e.Range(), err)
			}
		}
		if e.Type.Numeric() {
			below := strconv.FormatInt(e.Min-1, 10)
			if _, err := controller.ValidateBrokerConfig(n, below); err == nil {
				t.Errorf("%s=%s (registry %s): accepted", n, below, e.Range())
			}
		}
	}
}

// TestBrokerConfigCatalogue: every broker config isrbench can set (serve --set), change at
// run time, or names as a topic config's synonym is a registry entry (which DescribeConfigs
// reports), with the registry's type in the controller.
func TestBrokerConfigCatalogue(t *testing.T) {
	var names []string
	for _, k := range SettableKeys() {
		names = append(names, brokerConfigName(k))
	}
	names = append(names, controller.DynamicBrokerConfigNames()...)
	for _, d := range controller.TopicConfigDefs() {
		if d.BrokerSynonym != "" { // the throttled replicas lists have none
			names = append(names, d.BrokerSynonym)
		}
	}
	for _, n := range names {
		if _, ok := config.Lookup(n); !ok {
			t.Errorf("broker config %s is not in the registry", n)
		}
	}
	for _, n := range controller.DynamicBrokerConfigNames() {
		if got, want := controller.BrokerConfigType(n), string(config.Get(n).Type); got != want {
			t.Errorf("%s: type %s in the controller, %s in the registry", n, got, want)
		}
	}
}

// storeInt stores n in the integer field of setting name without the range check (a Config
// built in Go); false when the setting has no integer field.
func storeInt(c *Config, name string, n int64) bool {
	b, ok := lookupBinding(name)
	if !ok {
		return false
	}
	switch p := b.field(c).(type) {
	case *int:
		*p = int(n)
	case *int16:
		*p = int16(n)
	case *int32:
		*p = int32(n)
	case *int64:
		*p = n
	default:
		return false
	}
	return true
}
