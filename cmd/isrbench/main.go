// Command isrbench runs the isrbench replication core and its benchmarking harness.
//
// The main package is thin: each subcommand lives in its own file and registers
// itself with register; the work is done by the library packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"syscall"

	"github.com/isrbench/isrbench/results"
	"golang.org/x/sys/unix"
)

// command is one subcommand: it parses args and does the work, writing to stdout/stderr.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; called from init functions.
func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("BUG: duplicate command " + name)
	}
	commands[name] = command{name: name, summary: summary, run: run}
}

// usageError marks bad command-line input: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError carries a specific exit status (1 = failure or regression) with an optional message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// defaultGCPercent is the GC target when GOGC is unset: the embedded cluster, the clients and
// the recorder share one heap, and at the default 100 a 5k records/s run collects ~115 times in
// 10 s; at 400 about 27 times, with a lower ack-latency tail. GOGC in the environment wins.
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	// Tables fit 120 characters, or the terminal's width when standard output is a wider one.
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil {
		results.SetTableWidth(int(ws.Col))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode maps run's error to the process exit status: 0 ok, 1 failure or regression, 2 usage.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "isrbench: %v\n", err)
		return 2
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "isrbench: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "isrbench: %v\n", err)
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout)
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		printUsage(stderr)
		return usagef("unknown command %q", args[0])
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: isrbench <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'isrbench <command> --help' for a command's flags")
}
