package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/isrbench/isrbench/workloads/specs"
)

// SpecNames lists the specs embedded in the binary (workloads/specs/*.yaml, without .yaml).
func SpecNames() []string {
	ents, _ := specs.FS.ReadDir(".")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Load reads a spec by name or path: an existing file path is read from disk; otherwise
// "default", "default.yaml" or "workloads/specs/default.yaml" name an embedded spec.
func Load(nameOrPath string) (*Spec, error) {
	if nameOrPath == "" {
		nameOrPath = "default"
	}
	if st, err := os.Stat(nameOrPath); err == nil && st.IsDir() {
		return nil, fmt.Errorf("workload %s is a directory; want a spec file or an embedded name (%s)", nameOrPath, strings.Join(SpecNames(), ", "))
	} else if err == nil {
		if st.Size() > MaxSpecBytes {
			return nil, fmt.Errorf("workload %s: %w", nameOrPath, specSizeError(st.Size()))
		}
		f, err := os.Open(nameOrPath)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1)) // also bounds a file that grows or a FIFO
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", nameOrPath, err)
		}
		s, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", nameOrPath, err)
		}
		return s, nil
	}
	base := strings.TrimSuffix(filepath.Base(nameOrPath), ".yaml")
	b, err := specs.FS.ReadFile(base + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("workload %q: no such file and no embedded spec of that name (embedded: %s)",
			nameOrPath, strings.Join(SpecNames(), ", "))
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("workload %s (embedded): %w", base, err)
	}
	return s, nil
}

// Parse decodes a YAML spec over DefaultSpec and validates it. Unknown keys, wrong types and
// out-of-range values are errors naming the key (its flat name and line) and the allowed values;
// so are a key given twice, a setting given twice under two spellings, a second YAML document,
// merge keys, and a spec over MaxSpecBytes or whose aliases expand past a bound.
func Parse(b []byte) (*Spec, error) {
	if len(b) > MaxSpecBytes {
		return nil, specSizeError(int64(len(b)))
	}
	s := DefaultSpec()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty spec")
		}
		return nil, fmt.Errorf("yaml: %w", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("line %d: a second YAML document (after ---); a spec is one document", max(more.Line, 1))
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, errors.New("spec must be a YAML mapping at the top level")
	}
	top, err := resolveSpecTree(doc.Content[0])
	if err != nil {
		return nil, err
	}
	if top.Kind != yaml.MappingNode {
		return nil, errors.New("spec must be a YAML mapping at the top level")
	}
	if err := s.applyNode("", top, keyLines{}); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// sections are the YAML mappings whose leaves are flat keys.
var sections = map[string]bool{"topic": true, "broker": true, "producers": true, "consumers": true}

func (s *Spec) applyNode(prefix string, m *yaml.Node, seen keyLines) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		full := key
		if prefix != "" {
			full = prefix + "." + key
		}
		switch {
		case prefix == "" && key == "faults":
			if err := s.applyFaults(v); err != nil {
				return err
			}
			continue
		case prefix == "" && key == "sweep":
			if err := s.applySweep(v); err != nil {
				return err
			}
			continue
		case prefix == "" && key == "producers" && v.Kind == yaml.SequenceNode:
			if err := s.applyProducerList(v, seen); err != nil {
				return err
			}
			continue
		case prefix == "" && key == "target" && v.Kind == yaml.MappingNode:
			if err := s.applyTargetNode(v); err != nil {
				return err
			}
			continue
		case prefix == "" && sections[key]:
			if v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || v.Value == "") {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: %s: want a mapping of %s settings", v.Line, key, key)
			}
			if err := s.applyNode(key, v, seen); err != nil {
				return err
			}
			continue
		}
		p := lookupFull(full)
		if p == nil {
			return fmt.Errorf("line %d: unknown key %q (%s)", k.Line, full, knownUnder(prefix))
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a single value, got a %s", v.Line, full, nodeKind(v))
		}
		if err := seen.note(p, full, k.Line); err != nil {
			return err
		}
		if err := p.set(s, v.Value); err != nil {
			return fmt.Errorf("line %d: %w", v.Line, err)
		}
		s.markGiven(p.Key)
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// applyProducerList reads producers: as a list of groups: the first into Producers, the rest
// into MoreProducers (each group starts from the defaults). The first group's keys count as
// given at the top level too (seen), as they set the same fields as producers.* keys.
func (s *Spec) applyProducerList(v *yaml.Node, seen keyLines) error {
	if len(v.Content) == 0 {
		return fmt.Errorf("line %d: producers: empty list; want at least one group {count, acks, ...}", v.Line)
	}
	s.MoreProducers = nil
	for i, it := range v.Content {
		if it.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: producers[%d]: want a mapping of producer settings", it.Line, i)
		}
		tmp := DefaultSpec()
		group := keyLines{}
		if i == 0 {
			group = seen
		}
		if err := tmp.applyNode("producers", it, group); err != nil {
			return fmt.Errorf("producers[%d]: %w", i, err)
		}
		if i == 0 {
			s.Producers = tmp.Producers
		} else {
			s.MoreProducers = append(s.MoreProducers, tmp.Producers)
		}
	}
	return nil
}

// ProducerGroups returns every producer group: Producers, then MoreProducers.
func (s *Spec) ProducerGroups() []ProducerSpec {
	return append([]ProducerSpec{s.Producers}, s.MoreProducers...)
}

// validateProducerGroups range-checks every group and its rate against the duration.
func (s *Spec) validateProducerGroups() error {
	for i, g := range s.ProducerGroups() {
		name := "producers"
		if len(s.MoreProducers) > 0 {
			name = fmt.Sprintf("producers[%d]", i)
		}
		if i > 0 {
			tmp := s.Clone()
			tmp.Producers = g
			for _, p := range params {
				if strings.HasPrefix(p.Key, "producers.") {
					if err := p.set(tmp.Clone(), fmt.Sprint(p.get(tmp))); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
			}
		}
		if g.Count > 0 && g.Rate > 0 && g.Rate < float64(g.Count)/s.Duration.Seconds() {
			return fmt.Errorf("%s.rate: %g records/s gives each of %d producers less than one record in %s",
				name, g.Rate, g.Count, s.Duration)
		}
	}
	return nil
}

func (s *Spec) applySweep(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: sweep: want a mapping of key -> [values]", v.Line)
	}
	s.Sweep = map[string][]string{}
	s.SweepKeys = nil
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, list := v.Content[i], v.Content[i+1]
		p := Lookup(k.Value)
		if p == nil {
			return fmt.Errorf("line %d: sweep: unknown key %q (see `isrbench run --help` for the keys)", k.Line, k.Value)
		}
		var vals []string
		switch list.Kind {
		case yaml.SequenceNode:
			for _, it := range list.Content {
				if it.Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: sweep.%s: want a list of values", it.Line, k.Value)
				}
				vals = append(vals, it.Value)
			}
		case yaml.ScalarNode:
			vals = SplitList(list.Value)
		default:
			return fmt.Errorf("line %d: sweep.%s: want a list of values", list.Line, k.Value)
		}
		if len(vals) == 0 {
			return fmt.Errorf("line %d: sweep.%s: no values", list.Line, k.Value)
		}
		// Each value must be valid for the key.
		probe := DefaultSpec()
		for i, val := range vals {
			if err := p.set(probe, val); err != nil {
				return fmt.Errorf("line %d: sweep: %w", list.Line, err)
			}
			if slices.Contains(vals[:i], val) {
				return fmt.Errorf("line %d: sweep.%s: value %s given twice; use isrbench sweep --repeat N to run a point more than once", list.Line, k.Value, val)
			}
		}
		if _, dup := s.Sweep[p.Key]; dup {
			return fmt.Errorf("line %d: sweep: key %s given twice", k.Line, p.Key)
		}
		s.Sweep[p.Key] = vals
		s.SweepKeys = append(s.SweepKeys, p.Key)
	}
	return nil
}

func (s *Spec) applyFaults(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		s.Faults = nil
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: faults: want a list of faults", v.Line)
	}
	s.Faults = nil
	for idx, it := range v.Content {
		if it.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: faults[%d]: want a mapping {at, duration, kind, target}", it.Line, idx)
		}
		f := Fault{Target: "leader", To: -1}
		for i := 0; i+1 < len(it.Content); i += 2 {
			k, val := it.Content[i], it.Content[i+1]
			name := fmt.Sprintf("faults[%d].%s", idx, k.Value)
			if val.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: %s: want a single value", val.Line, name)
			}
			var err error
			switch k.Value {
			case "at":
				f.At, err = parseDuration(name, val.Value, 0, 24*time.Hour)
			case "duration":
				f.Duration, err = parseDuration(name, val.Value, 0, 24*time.Hour)
			case "kind":
				f.Kind, err = CanonicalFaultKind(name, val.Value)
			case "target":
				f.Target = val.Value
			case "partition":
				var n int64
				n, err = parseInt(name, val.Value, 0, 100000)
				f.Partition = int(n)
			case "fence":
				f.Fence, err = parseEnum(name, val.Value, []string{"now", "session"})
			case "latency":
				f.Latency, err = parseDuration(name, val.Value, 0, time.Minute)
			case "jitter":
				f.Jitter, err = parseDuration(name, val.Value, 0, time.Minute)
			case "bandwidth":
				f.Bandwidth, err = parseInt(name, val.Value, 0, math.MaxInt64)
			case "command":
				f.Command, err = execCommand(name, val.Value)
			case "undo":
				f.Undo, err = execCommand(name, val.Value)
			case "timeout":
				f.Timeout, err = parseDuration(name, val.Value, time.Millisecond, 24*time.Hour)
			case "to":
				var n int64
				n, err = parseInt(name, val.Value, -1, math.MaxInt32)
				f.To = int32(n)
			case "add":
				f.Add, err = parseBool(name, val.Value)
			default:
				err = fmt.Errorf("unknown key %q (known: at, duration, kind, target, partition, fence, latency, jitter, bandwidth, command, undo, timeout, to, add)", name)
			}
			if err != nil {
				return fmt.Errorf("line %d: %w", val.Line, err)
			}
		}
		if f.Kind == "" {
			return fmt.Errorf("line %d: faults[%d].kind is required (one of %s)", it.Line, idx, strings.Join(FaultKinds, "|"))
		}
		s.Faults = append(s.Faults, f)
	}
	return nil
}

// parseBool parses a YAML boolean of key.
func parseBool(key, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean; allowed true|false", key, v)
	}
	return b, nil
}
