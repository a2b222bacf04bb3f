package config

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSettingsWalkRegistry: every sample value of every entry is accepted by Set, read back
// in its typed form and as the same text; the zero Settings reads every default.
func TestSettingsWalkRegistry(t *testing.T) {
	var zero Settings
	for _, e := range Entries() {
		if got := zero.Text(e.Name); got != e.Default {
			t.Errorf("%s: zero Settings reads %q, default %q", e.Name, got, e.Default)
		}
		if zero.IsSet(e.Name) {
			t.Errorf("%s: IsSet in the zero Settings", e.Name)
		}
		for _, v := range e.Samples() {
			s, err := zero.With(e.Name, v)
			if err != nil {
				t.Errorf("%s=%s: %v", e.Name, v, err)
				continue
			}
			if !s.IsSet(e.Name) || s.Text(e.Name) != v {
				t.Errorf("%s=%s: IsSet %v, Text %q", e.Name, v, s.IsSet(e.Name), s.Text(e.Name))
			}
			switch {
			case e.Type.Numeric():
				if got := strconv.FormatInt(s.Int(e.Name), 10); got != v {
					t.Errorf("%s=%s: Int %s", e.Name, v, got)
				}
			case e.Type == Boolean:
				if got := strconv.FormatBool(s.Bool(e.Name)); got != v {
					t.Errorf("%s=%s: Bool %s", e.Name, v, got)
				}
			case e.Type == Duration:
				if got := s.Duration(e.Name).String(); got != v {
					t.Errorf("%s=%s: Duration %s", e.Name, v, got)
				}
			}
		}
	}
}

// TestSettingsBadValues: a bad value is an error naming the key and the allowed values, and
// leaves the Settings as they were.
func TestSettingsBadValues(t *testing.T) {
	var s Settings
	if err := s.Set("replica.fetch.min.bytes", "4096"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, v, want string }{
		{"replica.fetch.min.bytes", "0", "1..2147483647"},
		{"replica.fetch.min.bytes", "x", "not an integer"},
		{"isrbench.zero.copy", "yes", "true or false"},
		{"isrbench.hw.update", "spin", "atomic|mutex"},
		{"isrbench.produce.delay", "2m", "0s..1m0s"},
		{"log.cleanup.policy", "compact", "supports only"},
		{"no.such.setting", "1", "unknown setting"},
	} {
		err := s.Set(c.name, c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.name != "no.such.setting" && !strings.Contains(err.Error(), c.name)) {
			t.Errorf("%s=%s: error %v, want one naming the key and %q", c.name, c.v, err, c.want)
		}
	}
	if got := s.Int("replica.fetch.min.bytes"); got != 4096 {
		t.Errorf("after the refused values replica.fetch.min.bytes = %d, want 4096", got)
	}
	if got := s.Given(); len(got) != 1 || got[0] != "replica.fetch.min.bytes" {
		t.Errorf("Given = %v", got)
	}
}

// TestSettingsAreValues: a copy does not see a later Set of the original, nor the original
// the copy's.
func TestSettingsAreValues(t *testing.T) {
	var a Settings
	if err := a.Set("num.replica.fetchers", "2"); err != nil {
		t.Fatal(err)
	}
	b := a
	if err := b.Set("num.replica.fetchers", "4"); err != nil {
		t.Fatal(err)
	}
	if err := a.Set("replica.lag.time.max.ms", "100"); err != nil {
		t.Fatal(err)
	}
	if a.Int("num.replica.fetchers") != 2 || b.Int("num.replica.fetchers") != 4 || b.IsSet("replica.lag.time.max.ms") {
		t.Errorf("a %v, b %v: copies share state", a.Given(), b.Given())
	}
	if got := a.Ms("replica.lag.time.max.ms"); got != 100*time.Millisecond {
		t.Errorf("Ms = %v", got)
	}
	if got := a.Ms("connections.max.idle.ms"); got != 600*time.Second {
		t.Errorf("Ms(default) = %v", got)
	}
	c, _ := a.With("connections.max.idle.ms", "-1")
	if got := c.Ms("connections.max.idle.ms"); got != -1 {
		t.Errorf("Ms(-1) = %v, want -1 (never)", got)
	}
}

// TestSettingsCheck: queued.max.request.bytes must reach socket.request.max.bytes unless -1.
func TestSettingsCheck(t *testing.T) {
	var s Settings
	if err := s.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	s, _ = s.With("queued.max.request.bytes", "1000")
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "socket.request.max.bytes") {
		t.Errorf("queued 1000 < socket 104857600: error %v", err)
	}
	s, _ = s.With("socket.request.max.bytes", "1000")
	if err := s.Check(); err != nil {
		t.Errorf("queued 1000 >= socket 1000: %v", err)
	}
}

// TestSettingsWrongType: reading a setting as another type is a programmer error.
func TestSettingsWrongType(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "BUG") {
			t.Errorf("recover = %v, want a BUG panic", r)
		}
	}()
	var s Settings
	s.Int("isrbench.zero.copy")
}
