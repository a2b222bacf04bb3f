package spec

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Bounds of a spec document, checked before anything in it is applied.
const (
	// MaxSpecBytes is the largest spec accepted (1 MiB; the shipped specs are under 2 KiB).
	MaxSpecBytes = 1 << 20
	// maxSpecNodes bounds the YAML nodes of a spec once its aliases are expanded, so that
	// a document of nested aliases (a "billion laughs") is an error, not an exhausted
	// memory.
	maxSpecNodes = 100_000
)

// resolveSpecTree returns the document's tree with every alias (*name) replaced by a copy of
// its anchored node (&name), and checks it on the way: at most maxSpecNodes nodes after
// expansion, no merge key (<<), and no key given twice in one mapping (yaml.v3 keeps both in
// a node tree; the last would silently win).
func resolveSpecTree(n *yaml.Node) (*yaml.Node, error) {
	r := &resolver{}
	return r.resolve(n, "", 0)
}

type resolver struct{ nodes int }

func (r *resolver) resolve(n *yaml.Node, path string, depth int) (*yaml.Node, error) {
	r.nodes++
	if r.nodes > maxSpecNodes {
		return nil, fmt.Errorf("line %d: the spec has more than %d YAML nodes (counting each alias *name as a copy of its anchor); a spec needs far fewer", n.Line, maxSpecNodes)
	}
	if depth > 64 {
		return nil, fmt.Errorf("line %d: %s: nested more than 64 levels deep", n.Line, orTop(path))
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: alias *%s names no anchor", n.Line, n.Value)
		}
		c, err := r.resolve(n.Alias, path, depth+1)
		if err != nil {
			return nil, err
		}
		if c.Kind == yaml.ScalarNode { // report a value by where it is used
			cc := *c
			cc.Line, cc.Column = n.Line, n.Column
			c = &cc
		}
		return c, nil
	}
	out := *n
	out.Anchor, out.Alias = "", nil
	if len(n.Content) == 0 {
		return &out, nil
	}
	out.Content = make([]*yaml.Node, 0, len(n.Content))
	switch n.Kind {
	case yaml.MappingNode:
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := r.resolve(n.Content[i], path, depth+1)
			if err != nil {
				return nil, err
			}
			if k.Tag == "!!merge" || (k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0) {
				return nil, fmt.Errorf("line %d: %s: merge keys (<<) are not supported in a spec; write the keys out", k.Line, orTop(path))
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s: a key must be a single value, not a %s", k.Line, orTop(path), nodeKind(k))
			}
			full := join(path, k.Value)
			if line, dup := first[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q (first at line %d); a key may appear once", k.Line, full, line)
			}
			first[k.Value] = k.Line
			v, err := r.resolve(n.Content[i+1], full, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, k, v)
		}
	default:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", orTop(path), i)
			}
			rc, err := r.resolve(c, p, depth+1)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, rc)
		}
	}
	return &out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// keyLines records where each setting was given (by canonical key), so that one setting
// written twice under two spellings (topic: {partitions: 3} and topic.partitions: 6) is an
// error naming both lines.
type keyLines map[string]keyAt

type keyAt struct {
	line int
	as   string
}

func (kl keyLines) note(p *Param, as string, line int) error {
	if prev, dup := kl[p.Key]; dup {
		also := ""
		if prev.as != as {
			also = fmt.Sprintf(" as %q", prev.as)
		}
		return fmt.Errorf("line %d: %q sets %s, already set at line %d%s; give each setting once", line, as, p.Key, prev.line, also)
	}
	kl[p.Key] = keyAt{line, as}
	return nil
}

// specSizeError is the error for a spec over MaxSpecBytes.
func specSizeError(n int64) error {
	return fmt.Errorf("spec is %d bytes, more than the %d (1 MiB) allowed", n, MaxSpecBytes)
}
