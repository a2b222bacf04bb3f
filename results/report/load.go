package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/results"
)

// File names a report reads or writes next to result.json and sweep.json.
const (
	FileName        = "report.html"
	GateFile        = "gate.json"
	sweepFile       = "sweep.json"
	faultsFile      = "faults.json"
	timelineFile    = "timeline.csv"
	partitionsFile  = "partitions.csv"
	resultFile      = results.ResultFileName
	gateBaseDirName = "base"
	gateNewDirName  = "new"
)

// runDir is one run directory read back: the result, its raw JSON (for the config as
// written and the generic cost object) and the files next to it.
type runDir struct {
	dir    string // the directory holding result.json
	res    *results.Result
	config map[string]any // result.json config, numbers as json.Number
	cost   json.RawMessage
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// loadRun reads path: a run directory or its result.json.
func loadRun(path string) (*runDir, error) {
	p := path
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	} else if st.IsDir() {
		p = filepath.Join(path, resultFile)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	res, err := results.DecodeResult(b)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", p, err)
	}
	var raw struct {
		Config map[string]any  `json:"config"`
		Cost   json.RawMessage `json:"cost"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("report: %s: %w", p, err)
	}
	return &runDir{dir: filepath.Dir(p), res: res, config: raw.Config, cost: raw.Cost}, nil
}

// loadRuns reads every result.json under dir (results.LoadResults order).
func loadRuns(dir string) ([]*runDir, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == resultFile {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report: walk %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("report: %s: %w", dir, results.ErrNoResults)
	}
	sort.Strings(paths)
	out := make([]*runDir, 0, len(paths))
	for _, p := range paths {
		r, err := loadRun(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// resolve finds the file p that result.json names (joined with the run directory at run time,
// so possibly relative to another working directory, or absolute under another parent):
// p itself when absolute and present, else the part of p after the run's directory name
// joined with the run directory, else p relative to the working directory, else the base name
// in the run directory. "" when none exists.
func (r *runDir) resolve(p string) string {
	if p == "" {
		return ""
	}
	if filepath.IsAbs(p) && fileExists(p) {
		return p
	}
	id := filepath.Base(r.dir)
	parts := strings.Split(filepath.ToSlash(p), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] == id {
			if c := filepath.Join(append([]string{r.dir}, parts[i+1:]...)...); fileExists(c) {
				return c
			}
			break
		}
	}
	if !filepath.IsAbs(p) && fileExists(p) {
		return p
	}
	if c := filepath.Join(r.dir, filepath.Base(p)); fileExists(c) {
		return c
	}
	return ""
}

// href is the link to file from a page in pageDir: relative, slash-separated, each segment
// escaped.
func href(pageDir, file string) string {
	af, err1 := filepath.Abs(file)
	ad, err2 := filepath.Abs(pageDir)
	rel := af
	if err1 == nil && err2 == nil {
		if r, err := filepath.Rel(ad, af); err == nil {
			rel = r
		}
	}
	segs := strings.Split(filepath.ToSlash(rel), "/")
	for i, s := range segs {
		if s != ".." && s != "." {
			segs[i] = url.PathEscape(s)
		}
	}
	out := strings.Join(segs, "/")
	if filepath.IsAbs(rel) {
		return "file://" + out
	}
	return out
}

// faultsReport is the part of faults.json a report shows (written by the runner).
type faultsReport struct {
	PartitionsCSV        string     `json:"partitions_csv"`
	ISREvents            []ISREvent `json:"isr_events"`
	ISRShrinks           int        `json:"isr_shrinks"`
	ISRExpands           int        `json:"isr_expands"`
	LeaderlessPartitionS float64    `json:"leaderless_partition_s"`
	Faults               []struct {
		Kind           string  `json:"kind"`
		Target         string  `json:"target"`
		AtS            float64 `json:"at_s"`
		TimeToShrinkS  float64 `json:"time_to_shrink_s"`
		TimeToRejoinS  float64 `json:"time_to_rejoin_s"`
		FailedProduces int64   `json:"failed_produces"`
	} `json:"faults"`
	ReplicaLogs *ReplicaLogs `json:"replica_logs"`
}

// readFaults reads the run's faults.json; (nil, "", nil) when the run has none.
func (r *runDir) readFaults() (*faultsReport, string, error) {
	return readRunFile(r.find(r.resolve(r.res.Files.Faults), faultsFile), func(f io.Reader) (*faultsReport, error) {
		b, err := io.ReadAll(f)
		if err != nil {
			return nil, err
		}
		var fr faultsReport
		if err := json.Unmarshal(b, &fr); err != nil {
			return nil, err
		}
		return &fr, nil
	})
}

// readTimeline reads the run's timeline.csv; (nil, "", nil) when it has none.
func (r *runDir) readTimeline() ([]results.TimelineRow, string, error) {
	return readRunFile(r.find(r.resolve(r.res.Files.Timeline), timelineFile), func(f io.Reader) ([]results.TimelineRow, error) {
		rows, _, err := results.ReadTimeline(f)
		return rows, err
	})
}

// partRow is one row of partitions.csv: the ISR size of one partition at one moment.
type partRow struct {
	T         float64
	Partition int32
	ISR       int
	Replicas  int
}

// readPartitions reads the run's partitions.csv (result.json's name for it, else name, else
// the default); (nil, "", nil) when it has none.
func (r *runDir) readPartitions(name string) ([]partRow, string, error) {
	p := r.resolve(r.res.Files.Partitions)
	if p == "" && name != "" {
		p = r.resolve(name)
	}
	return readRunFile(r.find(p, partitionsFile), parsePartitions)
}

// find returns p (a path resolve found) when set, else the run directory's def when it
// exists, else "".
func (r *runDir) find(p, def string) string {
	if p != "" {
		return p
	}
	if p = filepath.Join(r.dir, def); fileExists(p) {
		return p
	}
	return ""
}

// readRunFile parses the run file at p with parse and returns it with its path; the zero
// value and "" when p is "" (the run has no such file).
func readRunFile[T any](p string, parse func(io.Reader) (T, error)) (T, string, error) {
	var zero T
	if p == "" {
		return zero, "", nil
	}
	f, err := os.Open(p)
	if err != nil {
		return zero, "", fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, "", fmt.Errorf("report: %s: %w", p, err)
	}
	return v, p, nil
}

// parsePartitions reads partitions.csv (columns t_s, partition, replicas and isr by name;
// replicas and isr are space-separated broker ids). Errors name the line and column.
func parsePartitions(rd io.Reader) ([]partRow, error) {
	cr := csv.NewReader(rd)
	cr.FieldsPerRecord = -1
	hdr, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	col := map[string]int{}
	for i, c := range hdr {
		col[c] = i
	}
	for _, c := range []string{"t_s", "partition", "replicas", "isr"} {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("header has no %q column (have %v)", c, hdr)
		}
	}
	var out []partRow
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		get := func(c string) (string, error) {
			i := col[c]
			if i >= len(rec) {
				return "", fmt.Errorf("line %d: no %s column", line, c)
			}
			return rec[i], nil
		}
		var row partRow
		ts, err := get("t_s")
		if err != nil {
			return nil, err
		}
		if row.T, err = strconv.ParseFloat(ts, 64); err != nil {
			return nil, fmt.Errorf("line %d column t_s: %q is not a number", line, ts)
		}
		ps, err := get("partition")
		if err != nil {
			return nil, err
		}
		pn, err := strconv.ParseInt(ps, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d column partition: %q is not a partition number", line, ps)
		}
		row.Partition = int32(pn)
		reps, err := get("replicas")
		if err != nil {
			return nil, err
		}
		isr, err := get("isr")
		if err != nil {
			return nil, err
		}
		row.Replicas, row.ISR = len(strings.Fields(reps)), len(strings.Fields(isr))
		out = append(out, row)
	}
}

// sweepIndex is the part of sweep.json a report reads (written by workloads.Sweep).
type sweepIndex struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Axes   []struct {
		Key    string   `json:"key"`
		Values []string `json:"values"`
	} `json:"axes"`
	Repeat int `json:"repeat"`
	Runs   []struct {
		Point    int               `json:"point"`
		Label    string            `json:"label"`
		Settings map[string]string `json:"settings"`
		Repeat   int               `json:"repeat"`
		Dir      string            `json:"dir"`
		Error    string            `json:"error"`
	} `json:"runs"`
}

func readSweepIndex(dir string) (*sweepIndex, error) {
	p := filepath.Join(dir, sweepFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var idx sweepIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("report: %s: %w", p, err)
	}
	return &idx, nil
}
