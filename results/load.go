package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ResultFileName is the name of a run's result file.
const ResultFileName = "result.json"

// IgnoredConfigKeys are config keys that identify a run rather than a configuration: they are
// left out when grouping repetitions and when finding varied keys. A key also counts as ignored
// when its last dotted component is one of these (e.g. "run.id", "sweep.repeat").
// GroupResults also ignores a key whose values are id-like strings (non-numeric, with at least 4
// digits) that differ in every result of the same name (a run id under a name not listed here).
var IgnoredConfigKeys = []string{"id", "run", "run_id", "runid", "repeat", "repetition", "rep", "repeat_index", "index",
	"iteration", "seed", "out", "output", "out_dir", "dir", "started_at", "time", "timestamp", "commit"}

func ignoredKey(k string) bool {
	last := k
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		last = k[i+1:]
	}
	for _, ig := range IgnoredConfigKeys {
		if k == ig || last == ig {
			return true
		}
	}
	return false
}

// LoadResults reads the results at path: a result.json file, or a directory walked for
// result.json files (a run dir, a sweep dir, a gate dir). Results come back in path order.
// A directory with no result.json is an error, as is any unreadable or invalid result.json.
func LoadResults(path string) ([]*Result, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if !st.IsDir() {
		r, err := ReadResult(path)
		if err != nil {
			return nil, err
		}
		return []*Result{r}, nil
	}
	var paths []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == ResultFileName {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("results: walk %s: %w", path, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("results: %s: %w", path, ErrNoResults)
	}
	sort.Strings(paths)
	out := make([]*Result, 0, len(paths))
	for _, p := range paths {
		r, err := ReadResult(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ErrNoResults is returned (wrapped) when a directory holds no result.json.
var ErrNoResults = errors.New("no " + ResultFileName + " found")

// Group is a set of repetitions of one configuration: same name, same config apart from
// IgnoredConfigKeys.
type Group struct {
	Key     string    // name + canonical config, used to match base and new groups
	Name    string    // spec name
	Label   string    // name plus the keys that vary between the groups of one load, e.g. "default/num.replica.fetchers=2"
	Results []*Result // repetitions, in load order
}

// GroupResults groups results into repetitions of one configuration, in first-seen order.
func GroupResults(rs []*Result) []*Group {
	runKeys := runIDKeys(rs)
	var groups []*Group
	byKey := map[string]*Group{}
	for _, r := range rs {
		k := groupKey(r, runKeys[r.Name])
		g := byKey[k]
		if g == nil {
			g = &Group{Key: k, Name: r.Name}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.Results = append(g.Results, r)
	}
	labelGroups(groups, runKeys)
	return groups
}

// runIDKeys finds, per result name, config keys holding non-numeric strings that differ in
// every result of that name (at least 2): run identifiers, not settings.
func runIDKeys(rs []*Result) map[string]map[string]bool {
	byName := map[string][]*Result{}
	for _, r := range rs {
		byName[r.Name] = append(byName[r.Name], r)
	}
	out := map[string]map[string]bool{}
	for name, group := range byName {
		if len(group) < 2 {
			continue
		}
		for k := range group[0].Config {
			seen := map[string]bool{}
			unique := true
			for _, r := range group {
				v, ok := r.Config[k].(string)
				if !ok || seen[v] || isNumberOrBool(v) || !idLike(v) {
					unique = false
					break
				}
				seen[v] = true
			}
			if unique {
				if out[name] == nil {
					out[name] = map[string]bool{}
				}
				out[name][k] = true
			}
		}
	}
	return out
}

// idLike: run ids carry a timestamp, counter or hash: at least 4 digits.
func idLike(s string) bool {
	n := 0
	for _, c := range s {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	return n >= 4
}

func isNumberOrBool(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return true
	}
	_, err := strconv.ParseBool(s)
	return err == nil
}

func groupKey(r *Result, skip map[string]bool) string {
	keys := make([]string, 0, len(r.Config))
	for k := range r.Config {
		if !ignoredKey(k) && !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString(r.Name)
	for _, k := range keys {
		fmt.Fprintf(&sb, "\x00%s=%s", k, configString(r.Config[k]))
	}
	return sb.String()
}

func labelGroups(groups []*Group, runKeys map[string]map[string]bool) {
	reps := make([]*Result, len(groups))
	for i, g := range groups {
		reps[i] = g.Results[0]
	}
	varied := VariedKeys(reps)
	for _, g := range groups {
		var sb strings.Builder
		sb.WriteString(g.Name)
		for _, k := range varied {
			if runKeys[g.Name][k] {
				continue
			}
			if v, ok := g.Results[0].Config[k]; ok {
				fmt.Fprintf(&sb, "/%s=%s", k, configString(v))
			}
		}
		g.Label = sb.String()
	}
}
