package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
)

func init() {
	register("profile", "analyse pprof files: top, diff, folded, web", cmdProfile)
}

// profileUsage is each subcommand's usage line.
var profileUsage = map[string]string{
	"top":    "profile top FILE [--by flat|cum|LABEL] [-n 20]",
	"diff":   "profile diff BASE NEW [-n 20] [--cum]",
	"folded": "profile folded FILE",
	"web":    "profile web [--http 127.0.0.1:0] FILE|BASE NEW",
}

func profileSubcommand(name string) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch name {
	case "top":
		return cmdProfileTop
	case "diff":
		return cmdProfileDiff
	case "folded":
		return cmdProfileFolded
	case "web":
		return cmdProfileWeb
	}
	return nil
}

func profileSubcommandNames() string {
	names := make([]string, 0, len(profileUsage))
	for n := range profileUsage {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// cmdProfile: isrbench profile top|diff|folded|web ...
func cmdProfile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("profile: missing subcommand (valid: %s)", profileSubcommandNames())
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, "usage:")
		for _, n := range []string{"top", "diff", "folded", "web"} {
			fmt.Fprintf(stdout, "  isrbench %s\n", profileUsage[n])
		}
		return nil
	}
	run := profileSubcommand(args[0])
	if run == nil {
		return usagef("profile: unknown subcommand %q (valid: %s)", args[0], profileSubcommandNames())
	}
	return run(ctx, args[1:], stdout, stderr)
}

func cmdProfileTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile top", profileUsage["top"], stderr)
	by := fs.String("by", "flat", "order by flat or cum, or split by a pprof label ("+profiles.LabelRole+", "+profiles.LabelBroker+")")
	n := fs.Int("n", 20, "number of functions to show (per label value with --by LABEL); 0 = all")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usagef("profile top: want one FILE, got %d argument(s)", len(pos))
	}
	if *n < 0 {
		return usagef("profile top: -n %d: want >= 0", *n)
	}
	if *by == "" {
		return usagef("profile top: --by must not be empty")
	}
	warnCoverage(stderr, "profile top", pos[0])
	return profiles.Top(stdout, pos[0], *by, *n)
}

// warnCoverage warns on stderr when file is the cpu.pprof of a run whose result.json (two
// directories up: <run>/profiles/cpu.pprof) says the profile holds less than half of the CPU
// time the run used: its shares and flame graph then show part of the work only. Files outside
// a run directory get no warning.
func warnCoverage(stderr io.Writer, cmd, file string) {
	if filepath.Base(file) != "cpu.pprof" {
		return
	}
	path := filepath.Join(filepath.Dir(filepath.Dir(file)), results.ResultFileName)
	r, err := results.ReadResult(path) // none there: not a run's profile
	if err != nil || r.Cost == nil || r.Cost.CPUSplitSource != "profiles/cpu.pprof" {
		return
	}
	if c := r.Cost.CPUProfileCoverage; c > 0 && c < 0.5 {
		fmt.Fprintf(stderr, "%s: warning: %s holds %.0f%% of the CPU time the run used (%s cost.cpu_profile_coverage): "+
			"the kernel raised few of the profiler's signals for this lightly loaded run, so its shares are not the run's; "+
			"profile under more load (README: Profiles)\n", cmd, file, 100*c, path)
	}
}

func cmdProfileDiff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile diff", profileUsage["diff"], stderr)
	n := fs.Int("n", 20, "number of functions to show, largest growth first; 0 = all")
	cum := fs.Bool("cum", false, "rank by cumulative growth (own time + callees) instead of flat")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usagef("profile diff: want BASE and NEW, got %d argument(s)", len(pos))
	}
	if *n < 0 {
		return usagef("profile diff: -n %d: want >= 0", *n)
	}
	return profiles.DiffBy(stdout, pos[0], pos[1], *n, *cum)
}

func cmdProfileFolded(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile folded", profileUsage["folded"], stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usagef("profile folded: want one FILE, got %d argument(s)", len(pos))
	}
	warnCoverage(stderr, "profile folded", pos[0])
	return profiles.Folded(stdout, pos[0])
}

func cmdProfileWeb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile web", profileUsage["web"], stderr)
	addr := fs.String("http", "127.0.0.1:0", "host:port to serve the pprof web UI on (port 0 = any free port); no browser is opened")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 && len(pos) != 2 {
		fs.Usage()
		return usagef("profile web: want FILE or BASE NEW, got %d argument(s)", len(pos))
	}
	return profiles.WebTo(ctx, stdout, *addr, nil, pos...)
}
