package netfetch

import (
	"slices"
	"strings"

	"github.com/isrbench/isrbench/core/config"
)

// brokerConfigDef is one broker config DescribeConfigs reports: its name, Kafka type and
// default, from the config registry (core/config). Its static value on a broker (what the
// broker was started with) comes in ServerConfig.BrokerConfigs. Whether it may change at run
// time is the controller's (controller.DynamicBrokerConfigNames: Kafka's dynamic update mode
// cluster-wide; every other one is read-only, as in Kafka).
type brokerConfigDef struct {
	name string
	typ  string // controller.Type*
	def  string // Kafka's default ("" for none: log.dirs)
}

// brokerConfigDefs lists the broker configs isrbench has, sorted by name: every registry
// entry, with the registry's type and default (Kafka's).
var brokerConfigDefs = func() []brokerConfigDef {
	var defs []brokerConfigDef
	for _, e := range config.Entries() {
		defs = append(defs, brokerConfigDef{name: e.Name, typ: string(e.Type), def: e.Default})
	}
	slices.SortFunc(defs, func(a, b brokerConfigDef) int { return strings.Compare(a.name, b.name) })
	return defs
}()

// lookupBrokerConfig returns the definition of a broker config name.
func lookupBrokerConfig(name string) (brokerConfigDef, bool) {
	i, ok := slices.BinarySearchFunc(brokerConfigDefs, name, func(d brokerConfigDef, n string) int {
		return strings.Compare(d.name, n)
	})
	if !ok {
		return brokerConfigDef{}, false
	}
	return brokerConfigDefs[i], true
}
