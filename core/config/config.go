package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type is a setting's type, as Kafka's ConfigDef types (DescribeConfigs' config_type), plus
// Duration for isrbench's switches given as Go durations ("500ms").
type Type string

// The types of settings.
const (
	Boolean  Type = "boolean"
	String   Type = "string"
	Int      Type = "int"
	Short    Type = "short"
	Long     Type = "long"
	List     Type = "list"
	Duration Type = "duration"
)

// Numeric reports whether values of t are integers with a range (Min..Max).
func (t Type) Numeric() bool { return t == Int || t == Short || t == Long }

// Side is where a setting belongs.
type Side string

// The sides of settings.
const (
	SideTopic   Side = "topic"   // a topic config
	SideBroker  Side = "broker"  // a broker config (server.properties; isrbench serve --set)
	SideClient  Side = "client"  // a producer's or consumer's config
	SideHarness Side = "harness" // isrbench's harness itself (not a cluster's)
)

// Update is whether Kafka can change a broker setting at run time (its "Dynamic Update Mode",
// DynamicBrokerConfig.AllDynamicConfigs).
type Update string

// Kafka's dynamic update modes.
const (
	ReadOnly    Update = "read-only"    // set at start only: a restart to change
	PerBroker   Update = "per-broker"   // changeable per broker and as the cluster-wide default
	ClusterWide Update = "cluster-wide" // changeable as the cluster-wide default
)

// MaxMs is the largest number of milliseconds a time.Duration holds: the maximum of the
// settings in ms that the brokers turn into durations (timers, tickers, deadlines).
const MaxMs = math.MaxInt64 / int64(time.Millisecond)

// Entry is one setting. The registry's entries (Lookup, Get, Entries) are never changed:
// any goroutine may read them; Entries returns copies.
type Entry struct {
	Name string
	Type Type
	// Unit is the unit of a numeric or duration value: "ms", "s", "bytes", "messages", "%",
	// "" for a count or none.
	Unit string
	// Default is Kafka's default (isrbench's own for isrbench.* switches) in the text form
	// DescribeConfigs reports; "" for none (log.dirs).
	Default string
	// Min and Max bound a numeric value (inclusive); a Duration's are in nanoseconds.
	Min, Max int64
	// Never: -1 is allowed besides Min..Max (never, unbounded).
	Never bool
	// AtLeast names another setting whose value this one's must reach (besides -1 when
	// Never): queued.max.request.bytes >= socket.request.max.bytes, as Kafka requires.
	AtLeast string
	// Modes are the allowed values of a String mode switch, its default first.
	Modes []string
	Side  Side
	// Update is Kafka's dynamic update mode of a broker config.
	Update Update
	// TopicConfig is the topic config this broker config is the default of (Kafka's
	// ServerTopicConfigSynonyms), "" when there is none.
	TopicConfig string
	// ThreadPool: a thread count Kafka refuses to change at run time to less than half or
	// more than double the current value (DynamicThreadPool).
	ThreadPool bool
	// Fixed: isrbench implements only the default (DescribeConfigs reports it; it cannot be
	// set).
	Fixed bool
	// Doc is a one-line description (help text), without the default and range.
	Doc string
}

// Range is the allowed values in words: "1..64", "-1 or 1..9223372036854", "atomic|mutex",
// "true|false", "0s..1m0s".
func (e *Entry) Range() string {
	switch {
	case e.Type.Numeric() && e.Never:
		return fmt.Sprintf("-1 or %d..%d", e.Min, e.Max)
	case e.Type.Numeric():
		return fmt.Sprintf("%d..%d", e.Min, e.Max)
	case e.Type == Duration:
		return fmt.Sprintf("%s..%s", time.Duration(e.Min), time.Duration(e.Max))
	case e.Type == Boolean:
		return "true|false"
	case len(e.Modes) > 0:
		return strings.Join(e.Modes, "|")
	}
	return "any"
}

// CheckInt checks an integer value of a numeric entry against its range (not AtLeast, which
// needs the other setting's value); the error names the key and the range.
func (e *Entry) CheckInt(n int64) error {
	if e.Never && n == -1 {
		return nil
	}
	if n < e.Min || n > e.Max {
		return fmt.Errorf("%s: %d is out of range; allowed %s", e.Name, n, e.Range())
	}
	return nil
}

// ParseInt parses and checks an integer value of a numeric entry.
func (e *Entry) ParseInt(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer; allowed %s", e.Name, v, e.Range())
	}
	return n, e.CheckInt(n)
}

// ParseDuration parses and checks a value of a Duration entry ("500ms").
func (e *Entry) ParseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration; allowed e.g. 500ms, 20s, 1m (%s)", e.Name, v, e.Range())
	}
	if int64(d) < e.Min || int64(d) > e.Max {
		return 0, fmt.Errorf("%s: %s is out of range; allowed %s", e.Name, d, e.Range())
	}
	return d, nil
}

// ParseMode checks a value of a String mode entry.
func (e *Entry) ParseMode(v string) (string, error) {
	if !slices.Contains(e.Modes, v) {
		return "", fmt.Errorf("%s: %q is not allowed; allowed %s", e.Name, v, e.Range())
	}
	return v, nil
}

// Samples returns values the registry accepts for e, at the edges of its range: the
// minimum, the maximum and the default of a numeric or Duration entry (and -1 when Never),
// every mode, both booleans; nil for a Fixed entry. The tests that walk the registry through
// every user try them all.
func (e *Entry) Samples() []string {
	switch {
	case e.Fixed:
		return nil
	case e.Type.Numeric():
		vs := []string{strconv.FormatInt(e.Min, 10), strconv.FormatInt(e.Max, 10), e.Default}
		if e.Never {
			vs = append(vs, "-1")
		}
		return vs
	case e.Type == Duration:
		return []string{time.Duration(e.Min).String(), time.Duration(e.Max).String(), e.Default}
	case e.Type == Boolean:
		return []string{"true", "false"}
	}
	return slices.Clone(e.Modes)
}

// DefaultInt is the default of a numeric entry as an integer.
func (e *Entry) DefaultInt() int64 {
	n, err := strconv.ParseInt(e.Default, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("config: %s has no integer default (%q)", e.Name, e.Default))
	}
	return n
}

// Lookup returns the entry of a setting by its name.
func Lookup(name string) (*Entry, bool) {
	i, ok := slices.BinarySearchFunc(entries, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return nil, false
	}
	return &entries[i], true
}

// Get returns the entry of name; it panics when there is none (a name written in the code,
// checked by the tests that walk the registry).
func Get(name string) *Entry {
	e, ok := Lookup(name)
	if !ok {
		panic("config: no registry entry " + name)
	}
	return e
}

// DefaultOf is Get(name).DefaultInt().
func DefaultOf(name string) int64 { return Get(name).DefaultInt() }

// Entries returns every entry, sorted by name.
func Entries() []Entry { return slices.Clone(entries) }
