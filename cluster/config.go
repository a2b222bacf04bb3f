package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/isrbench/isrbench/core/config"
)

// SettableKeys lists the keys Set accepts (Kafka config names and isrbench.* switches): every
// registry entry that is not Fixed, and flush.messages / flush.ms, the topic-level names of
// log.flush.interval.messages / .ms.
func SettableKeys() []string {
	keys := []string{"flush.messages", "flush.ms"}
	for _, e := range config.Entries() {
		if !e.Fixed {
			keys = append(keys, e.Name)
		}
	}
	slices.Sort(keys)
	return keys
}

// SettingsHelp documents the keys Set accepts, one line each, from the config registry
// (core/config): name, type and unit, Kafka's default, the allowed values, whether Kafka
// changes it at run time, and what it does.
func SettingsHelp() string {
	var b strings.Builder
	for _, k := range SettableKeys() {
		e := config.Get(brokerConfigName(k))
		typ := string(e.Type)
		if e.Unit != "" {
			typ += " " + e.Unit
		}
		doc := e.Doc
		if k != e.Name {
			doc = "topic-level name of " + e.Name
		}
		fmt.Fprintf(&b, "  %-46s %s, default %s, allowed %s, %s: %s\n", k, typ, e.Default, e.Range(), e.Update, doc)
	}
	b.WriteString(securityHelp())
	return b.String()
}

// Set applies one "key=value" setting under its Kafka name (or isrbench.* switch) to the
// cluster config: to Settings, and to the typed field it has, if any (bindings); an unknown
// key or bad value is an error naming the key and the allowed values.
func (c *Config) Set(key, value string) error {
	if ok, err := c.setSecurity(key, value); ok { // listeners and their security (security.go)
		if err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
		return nil
	}
	name := brokerConfigName(key)
	if e, ok := config.Lookup(name); !ok || e.Fixed {
		return fmt.Errorf("unknown setting %q (known: %s, and the security settings %s)", key, strings.Join(SettableKeys(), ", "), strings.Join(securityKeys, ", "))
	}
	next := *c
	if err := next.Settings.Set(name, value); err != nil {
		return err // names the key and the allowed values
	}
	if b, ok := lookupBinding(name); ok {
		if err := b.load(&next); err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
	}
	*c = next
	return nil
}

// Check applies the rules between settings (each was range-checked when set):
// queued.max.request.bytes against socket.request.max.bytes, as Kafka does.
func (c *Config) Check() error {
	if _, err := resolveSecurity(c); err != nil {
		return err
	}
	return c.Limits.Check(c.SocketRequestMaxBytes)
}

// brokerConfigName is the broker config a setting is reported as (flush.messages and
// flush.ms are the topic-level names of log.flush.interval.messages / .ms).
func brokerConfigName(key string) string {
	switch key {
	case "flush.messages":
		return "log.flush.interval.messages"
	case "flush.ms":
		return "log.flush.interval.ms"
	}
	return key
}

// SetKV applies "key=value".
func (c *Config) SetKV(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("setting %q: want key=value", kv)
	}
	return c.Set(strings.TrimSpace(k), v)
}
