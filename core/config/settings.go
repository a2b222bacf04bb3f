package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings is one value of the registry's settings: for every entry, the value given (by a
// spec, `--set`, server.properties) or else the registry's default. It is the value the
// harness, the cluster, each broker and the controller read a setting from, by its Kafka
// name, already parsed and range-checked: no consumer parses or re-checks a setting's text.
//
// The zero Settings is every default. A Settings is a value: Set replaces its map instead of
// changing it, so copies share nothing that changes; any goroutine may read one, one
// goroutine may Set a given copy.
type Settings struct {
	vals map[string]value // the settings given, by name; never changed once built
}

// value is one parsed setting: its text as DescribeConfigs reports it and the typed form.
type value struct {
	text string
	n    int64         // Int, Short, Long
	b    bool          // Boolean
	d    time.Duration // Duration
}

// Parse checks text against the entry of name (type, range, modes) and returns it as the
// canonical text form: "true"/"false", a decimal integer, a Go duration, a mode. The error
// names the key and the allowed values.
func Parse(name, text string) (string, error) {
	e, ok := Lookup(name)
	if !ok {
		return "", fmt.Errorf("unknown setting %q", name)
	}
	v, err := e.parse(text)
	return v.text, err
}

// parse parses and checks one value of e.
func (e *Entry) parse(text string) (value, error) {
	t := strings.TrimSpace(text)
	switch {
	case e.Fixed:
		if t != e.Default {
			return value{}, fmt.Errorf("%s: %q is not allowed: isrbench supports only %q (%s)", e.Name, text, e.Default, e.Doc)
		}
		return value{text: t}, nil
	case e.Type.Numeric():
		n, err := e.ParseInt(t)
		return value{text: strconv.FormatInt(n, 10), n: n}, err
	case e.Type == Boolean:
		switch strings.ToLower(t) {
		case "true":
			return value{text: "true", b: true}, nil
		case "false":
			return value{text: "false"}, nil
		}
		return value{}, fmt.Errorf("%s: %q is not true or false; allowed true|false", e.Name, text)
	case e.Type == Duration:
		d, err := e.ParseDuration(t)
		return value{text: d.String(), d: d}, err
	case len(e.Modes) > 0:
		m, err := e.ParseMode(t)
		return value{text: m}, err
	}
	return value{text: t}, nil
}

// defaultValue is e's default, parsed (the registry's init checked it).
func (e *Entry) defaultValue() value {
	v := value{text: e.Default}
	switch {
	case e.Type.Numeric() && e.Default != "":
		v.n = e.DefaultInt()
	case e.Type == Boolean:
		v.b = e.Default == "true"
	case e.Type == Duration:
		v.d, _ = time.ParseDuration(e.Default)
	}
	return v
}

// Set gives the setting name the value text, checked against its registry entry; the error
// names the key and the allowed values, and leaves s unchanged.
func (s *Settings) Set(name, text string) error {
	e, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("unknown setting %q", name)
	}
	v, err := e.parse(text)
	if err != nil {
		return err
	}
	next := make(map[string]value, len(s.vals)+1)
	maps.Copy(next, s.vals)
	next[name] = v
	s.vals = next
	return nil
}

// With returns a copy of s with name set to text (see Set).
func (s Settings) With(name, text string) (Settings, error) {
	err := s.Set(name, text)
	return s, err
}

// get returns the value of name: the one given, else the default. An unknown name, or one
// of another type than the caller reads, is a programmer error (the names are written in the
// code; the tests that walk the registry read each one).
func (s Settings) get(name string, want func(Type) bool) value {
	e := Get(name)
	if !want(e.Type) {
		panic(fmt.Sprintf("BUG: config: %s is a %s setting", name, e.Type))
	}
	if v, ok := s.vals[name]; ok {
		return v
	}
	return e.defaultValue()
}

// Int returns the value of a numeric setting (Int, Short, Long; -1 where the entry allows
// never/unbounded).
func (s Settings) Int(name string) int64 { return s.get(name, Type.Numeric).n }

// Bool returns the value of a Boolean setting.
func (s Settings) Bool(name string) bool {
	return s.get(name, func(t Type) bool { return t == Boolean }).b
}

// Duration returns the value of a Duration setting (isrbench's "500ms" switches).
func (s Settings) Duration(name string) time.Duration {
	return s.get(name, func(t Type) bool { return t == Duration }).d
}

// Ms returns a numeric setting in milliseconds as a duration; -1 (never) is returned as -1.
func (s Settings) Ms(name string) time.Duration {
	n := s.Int(name)
	if n < 0 {
		return -1
	}
	return time.Duration(n) * time.Millisecond
}

// Text returns the value of any setting in the text form DescribeConfigs reports ("" for an
// entry without a default that was not given: log.dirs).
func (s Settings) Text(name string) string {
	return s.get(name, func(Type) bool { return true }).text
}

// IsSet reports whether name was given (DescribeConfigs' STATIC_BROKER_CONFIG), even at its
// default.
func (s Settings) IsSet(name string) bool {
	_, ok := s.vals[name]
	return ok
}

// Given returns the names of the settings given, sorted.
func (s Settings) Given() []string { return slices.Sorted(maps.Keys(s.vals)) }

// Check applies the registry's rules between settings (AtLeast: queued.max.request.bytes >=
// socket.request.max.bytes, as Kafka requires), each value having been checked when set.
func (s Settings) Check() error {
	for i := range entries {
		e := &entries[i]
		if e.AtLeast == "" {
			continue
		}
		v, other := s.Int(e.Name), s.Int(e.AtLeast)
		if e.Never && v == -1 {
			continue
		}
		if v < other {
			never := ""
			if e.Never {
				never = "-1 or "
			}
			return fmt.Errorf("%s: %d is less than %s (%d); allowed %sat least %d", e.Name, v, e.AtLeast, other, never, other)
		}
	}
	return nil
}
