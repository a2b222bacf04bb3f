package spec

import "sort"

// markGiven records that the setting with canonical key was set explicitly.
func (s *Spec) markGiven(key string) {
	if s.given == nil {
		s.given = map[string]bool{}
	}
	s.given[key] = true
}

// Given reports whether the setting named by key (canonical or alias) was set explicitly: in
// the spec's YAML, by Set (--set, --assume) or by a sweep point. A default is not given.
func (s *Spec) Given(key string) bool {
	p := Lookup(key)
	return p != nil && s.given[p.Key]
}

// GivenKeys lists the canonical keys set explicitly, sorted.
func (s *Spec) GivenKeys() []string {
	out := make([]string, 0, len(s.given))
	for k := range s.given {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
