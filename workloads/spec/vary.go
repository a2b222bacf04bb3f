package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Axis is one swept key with its values, in the order given.
type Axis struct {
	Key    string   `json:"key"` // canonical key
	Values []string `json:"values"`
}

// Setting is one key=value of a sweep point.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Point is one combination of a sweep: one value per axis, in axis order.
type Point []Setting

// Label is "key=value,key=value" (empty for the single point of a sweep without axes).
func (p Point) Label() string {
	parts := make([]string, len(p))
	for i, s := range p {
		parts[i] = s.Key + "=" + s.Value
	}
	return strings.Join(parts, ",")
}

// Apply sets every value of the point on s and validates the result.
func (p Point) Apply(s *Spec) error {
	for _, kv := range p {
		if err := s.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return s.Validate()
}

// ParseVary parses --vary flags ("key=v1,v2,..."); each value is checked against the key.
// A key may appear once.
func ParseVary(flags []string) ([]Axis, error) {
	var axes []Axis
	seen := map[string]bool{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--vary %q: want key=v1,v2,...", f)
		}
		p := Lookup(k)
		if p == nil {
			return nil, fmt.Errorf("--vary %s: unknown key %q (known keys: %s)", f, k, strings.Join(Keys(), ", "))
		}
		vals := SplitList(v)
		if len(vals) == 0 {
			return nil, fmt.Errorf("--vary %s: no values", f)
		}
		probe := DefaultSpec()
		for i, val := range vals {
			if err := p.set(probe, val); err != nil {
				return nil, fmt.Errorf("--vary %s: %w", f, err)
			}
			if slices.Contains(vals[:i], val) {
				return nil, fmt.Errorf("--vary %s: value %s given twice; use --repeat N to run a point more than once", f, val)
			}
		}
		if seen[p.Key] {
			return nil, fmt.Errorf("--vary %s: key %s varied twice", f, p.Key)
		}
		seen[p.Key] = true
		axes = append(axes, Axis{Key: p.Key, Values: vals})
	}
	return axes, nil
}

// SweepAxes returns the spec's own sweep section as axes (spec order).
func (s *Spec) SweepAxes() []Axis {
	var axes []Axis
	for _, k := range s.SweepKeys {
		axes = append(axes, Axis{Key: k, Values: append([]string(nil), s.Sweep[k]...)})
	}
	return axes
}

// Points is the cartesian product of the axes, the first axis varying slowest.
// No axes -> one empty point.
func Points(axes []Axis) []Point {
	points := []Point{nil}
	for _, ax := range axes {
		var next []Point
		for _, p := range points {
			for _, v := range ax.Values {
				q := append(append(Point(nil), p...), Setting{Key: ax.Key, Value: v})
				next = append(next, q)
			}
		}
		points = next
	}
	return points
}
