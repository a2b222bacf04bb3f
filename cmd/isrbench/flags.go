package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errHelp is returned by parseFlags when --help was asked for: the usage was printed, exit 0.
var errHelp = errors.New("help requested")

// newFlags returns a FlagSet for a subcommand that reports its usage to stderr.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: isrbench %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; a bad flag is a usage error (exit 2), --help is errHelp (exit 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// parseInterspersed parses flags placed before, between or after the
// positional arguments and returns the positionals in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	rest := args
	for {
		if err := parseFlags(fs, rest); err != nil {
			return nil, err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		rest = rest[1:]
	}
}

// multiFlag collects a repeatable string flag such as --set k=v or --vary k=v1,v2.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// optDuration is a duration flag that remembers whether it was given: its text is checked
// by the spec key it sets (so --duration 0s gets the same error as --set duration=0s).
type optDuration struct {
	text string
	set  bool
}

func (o *optDuration) String() string { return o.text }
func (o *optDuration) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		return fmt.Errorf("%q is not a duration; allowed e.g. 500ms, 20s, 1m", s)
	}
	o.text, o.set = s, true
	return nil
}

// or returns the duration given, or def when the flag was not given.
func (o optDuration) or(def time.Duration) time.Duration {
	if !o.set {
		return def
	}
	d, _ := time.ParseDuration(o.text) // Set checked it
	return d
}

// checkBootstrap checks --bootstrap (host:port[,host:port]) and returns its addresses.
func checkBootstrap(cmd, bootstrap string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(bootstrap, ",") {
		a = strings.TrimSpace(a)
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" {
			return nil, usagef("%s: --bootstrap %q: %q is not host:port; want host:port[,host:port]", cmd, bootstrap, a)
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, usagef("%s: --bootstrap %q: %q: port %q is not a number in 1..65535", cmd, bootstrap, a, p)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// checkTimeout rejects a --timeout that leaves no time for a request.
func checkTimeout(cmd string, d time.Duration) error {
	if d <= 0 {
		return usagef("%s: --timeout %s: want a duration > 0, e.g. 10s", cmd, d)
	}
	return nil
}

// checkTopicName applies Kafka's topic name rule: 1..249 characters of [a-zA-Z0-9._-], not
// "." or "..".
func checkTopicName(cmd, name string) error {
	ok := name != "" && len(name) <= 249 && name != "." && name != ".."
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
	}
	if !ok {
		return usagef("%s: --topic %q: a topic name is 1..249 characters of [a-zA-Z0-9._-], not . or ..", cmd, name)
	}
	return nil
}

// onlyWith returns a usage error if a flag of names was given on the command line although
// it applies only with mode.
func onlyWith(fs *flag.FlagSet, mode string, names ...string) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return usagef("%s: %s apply only with %s", fs.Name(), strings.Join(bad, ", "), mode)
	}
	return nil
}
