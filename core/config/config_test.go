package config

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRegistryEntries: every entry is well formed: sorted and unique, a known type, side
// and update mode, a default its own range accepts, and an error one below its minimum and
// one above its maximum that names the key and the range.
func TestRegistryEntries(t *testing.T) {
	es := Entries()
	if !slices.IsSortedFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatal("entries are not sorted by name")
	}
	for _, e := range es {
		if e.Side == "" || e.Update == "" || e.Type == "" {
			t.Errorf("%s: side %q, update %q, type %q: all must be set", e.Name, e.Side, e.Update, e.Type)
		}
		if got, ok := Lookup(e.Name); !ok || got.Name != e.Name {
			t.Errorf("Lookup(%s) = %v, %v", e.Name, got, ok)
		}
		if e.Fixed {
			continue
		}
		switch {
		case e.Type.Numeric():
			for _, v := range []int64{e.Min, e.Max, e.DefaultInt()} {
				if e.AtLeast != "" && v == -1 {
					continue
				}
				if _, err := e.ParseInt(strconv.FormatInt(v, 10)); err != nil {
					t.Errorf("%s=%d: %v", e.Name, v, err)
				}
			}
			for _, v := range []int64{e.Min - 1, e.Max + 1} {
				if (e.Never && v == -1) || (v == e.Max+1 && e.Max == 1<<63-1) {
					continue
				}
				_, err := e.ParseInt(strconv.FormatInt(v, 10))
				if err == nil || !strings.Contains(err.Error(), e.Name) || !strings.Contains(err.Error(), e.Range()) {
					t.Errorf("%s=%d: error %v, want one naming the key and %s", e.Name, v, err, e.Range())
				}
			}
			if _, err := e.ParseInt("x"); err == nil || !strings.Contains(err.Error(), e.Name) {
				t.Errorf("%s=x: error %v, want one naming the key", e.Name, err)
			}
		case e.Type == String:
			if len(e.Modes) == 0 || e.Modes[0] != e.Default {
				t.Errorf("%s: modes %v: want the default %q first", e.Name, e.Modes, e.Default)
			}
			if _, err := e.ParseMode("nope"); err == nil || !strings.Contains(err.Error(), e.Range()) {
				t.Errorf("%s=nope: error %v, want one naming %s", e.Name, err, e.Range())
			}
		case e.Type == Duration:
			if _, err := e.ParseDuration(e.Default); err != nil {
				t.Errorf("%s: default: %v", e.Name, err)
			}
			if _, err := e.ParseDuration("-1ns"); err == nil || !strings.Contains(err.Error(), e.Range()) {
				t.Errorf("%s=-1ns: error %v, want one naming %s", e.Name, err, e.Range())
			}
		case e.Type == Boolean:
			if e.Default != "true" && e.Default != "false" {
				t.Errorf("%s: default %q", e.Name, e.Default)
			}
		}
		if e.AtLeast != "" {
			if _, ok := Lookup(e.AtLeast); !ok {
				t.Errorf("%s: at least %s, which is not in the registry", e.Name, e.AtLeast)
			}
		}
	}
}

// TestModes: each typed mode parses its own names, "" as its default, and refuses others
// naming the allowed values; the registry's mode entries list the same names.
func TestModes(t *testing.T) {
	check := func(name string, names []string, parse func(string) (string, error)) {
		t.Helper()
		if got := Get(name).Modes; !slices.Equal(got, names) {
			t.Errorf("%s: registry modes %v, typed modes %v", name, got, names)
		}
		for _, n := range names {
			if got, err := parse(n); err != nil || got != n {
				t.Errorf("%s: parse(%q) = %q, %v", name, n, got, err)
			}
		}
		if got, err := parse(""); err != nil || got != names[0] {
			t.Errorf("%s: parse(\"\") = %q, %v; want the default %q", name, got, err, names[0])
		}
		if _, err := parse("bogus"); err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
			t.Errorf("%s: parse(bogus) error %v, want the allowed values", name, err)
		}
	}
	check("isrbench.hw.update", modeNames(HWUpdates), func(v string) (string, error) { m, err := ParseHWUpdate(v); return m.String(), err })
	check("isrbench.truncate.mode", modeNames(TruncateModes), func(v string) (string, error) { m, err := ParseTruncateMode(v); return m.String(), err })
	check("isrbench.io", modeNames(IOs), func(v string) (string, error) { m, err := ParseIO(v); return m.String(), err })
}
