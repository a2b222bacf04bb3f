// Package scripttest runs scripted tests with recorded output, in the style of etcd-raft's
// datadriven tests: a script in testdata/*.txt is a story of commands, and under each
// command the state it left, as the test printed it:
//
//	# A comment: the story so far. Comments and blank lines are kept as they are.
//	append 0 records 10
//	----
//	leader 0 epoch 0 isr 0,1,2 hw 0
//
// A command is one line (a "\" at its end continues it on the next). The "----" line and
// the output block under it, up to the next blank line, are written by the test: run
// `go test ./core/partition -rewrite` after changing a script or the code, and read the
// diff. Without -rewrite, an output that differs from the recording fails the test with a
// line diff; a command without a recorded block fails too, so nothing goes unchecked.
//
// An output block never holds a blank line (the handler's blank lines are dropped) and
// always ends with a newline. A command with no output records "ok".
//
// Test-only: the packages with scripts import it from their _test.go files. The -rewrite
// flag is registered by internal/simflag, so that `go test ./... -rewrite` works too.
package scripttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/internal/simflag"
)

// Cmd is one command of a script.
type Cmd struct {
	// Pos is "file:line" of the command, for error messages.
	Pos string
	// Line is the whole command, continuation lines joined with a space.
	Line string
	// Name is the first word of Line, Args the others.
	Name string
	Args []string
}

// Fatalf fails the script at this command: a handler error, not an output to record.
func (c *Cmd) Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s: %s", c.Pos, c.Line, fmt.Sprintf(format, args...))
}

// Handler runs one command and returns what it records: the state after it, an error
// answer, or a query's result.
type Handler func(t *testing.T, c *Cmd) string

// Separator is the line between a command and its recorded output.
const Separator = "----"

// RunDir runs every testdata/*.txt script under dir as a subtest named after the file.
// newHandler is called once per script, so every script starts from a fresh state.
func RunDir(t *testing.T, dir string, newHandler func(t *testing.T) Handler) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			Run(t, f, newHandler(t))
		})
	}
}

// Run runs the script in file with h and checks (or, with -rewrite, rewrites) its recorded
// output.
func Run(t *testing.T, file string, h Handler) {
	t.Helper()
	run(t, file, h, *simflag.Rewrite)
}

// Check runs the script in file with h and checks its recorded output, also under
// -rewrite: for a second variant of the same story (another mode of the code under test),
// which must print what the first one recorded.
func Check(t *testing.T, file string, h Handler) {
	t.Helper()
	run(t, file, h, false)
}

func run(t *testing.T, file string, h Handler, rewrite bool) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := Parse(file, string(src))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	failed, afterOutput := false, false
	for _, st := range steps {
		if afterOutput && !strings.HasPrefix(st.Text, "\n") {
			out.WriteString("\n") // an output block ends at a blank line
		}
		out.WriteString(st.Text)
		if st.Cmd == nil {
			continue
		}
		got := normalize(h(t, st.Cmd))
		out.WriteString(Separator + "\n" + got)
		afterOutput = true
		if !rewrite && got != st.Output {
			failed = true
			if st.Output == "" {
				t.Errorf("%s: %s: no recorded output (run with -rewrite), got:\n%s", st.Cmd.Pos, st.Cmd.Line, got)
			} else {
				t.Errorf("%s: %s: output differs from the recording (-want +got):\n%s", st.Cmd.Pos, st.Cmd.Line, Diff(st.Output, got))
			}
		}
	}
	if rewrite && out.String() != string(src) {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rewritten", file)
	}
	if failed {
		t.Logf("run `go test -run '%s' -rewrite` to record the new output, then read the diff", t.Name())
	}
}

// Step is one part of a parsed script: the text before a command's output (comments, blank
// lines and the command itself) and, for a command, its recorded output.
type Step struct {
	Text   string // verbatim, each line ending in "\n"
	Cmd    *Cmd   // nil for trailing text after the last command
	Output string // the recorded block, "" when missing
}

// Parse splits a script into steps. Errors name the file and line.
func Parse(file, src string) ([]Step, error) {
	lines := strings.SplitAfter(src, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var steps []Step
	var text strings.Builder
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		if !strings.HasSuffix(raw, "\n") {
			raw += "\n" // the file's last line
		}
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			text.WriteString(raw)
			continue
		}
		if line == Separator {
			return nil, fmt.Errorf("%s:%d: %q without a command above it", file, i+1, Separator)
		}
		cmd := &Cmd{Pos: fmt.Sprintf("%s:%d", file, i+1)}
		text.WriteString(raw)
		full := line
		for strings.HasSuffix(full, `\`) {
			if i+1 >= len(lines) {
				return nil, fmt.Errorf("%s: a continued line at the end of the file", cmd.Pos)
			}
			i++
			text.WriteString(lines[i])
			full = strings.TrimSuffix(full, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if j := strings.Index(full, " #"); j >= 0 {
			full = full[:j] // a trailing comment
		}
		cmd.Line = strings.Join(strings.Fields(full), " ")
		f := strings.Fields(cmd.Line)
		cmd.Name, cmd.Args = f[0], f[1:]
		st := Step{Text: text.String(), Cmd: cmd}
		text.Reset()
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == Separator {
			i++
			var o strings.Builder
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				o.WriteString(strings.TrimSuffix(lines[i], "\n") + "\n")
			}
			st.Output = o.String()
		}
		steps = append(steps, st)
	}
	if text.Len() > 0 {
		steps = append(steps, Step{Text: text.String()})
	}
	return steps, nil
}

// normalize is what an output records: no trailing spaces, no blank lines, a final
// newline; "ok" for nothing.
func normalize(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " \t"); l != "" {
			b.WriteString(l + "\n")
		}
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

// Diff is a line diff of want and got (longest common subsequence): "-" lines only in want,
// "+" lines only in got, "  " lines in both.
func Diff(want, got string) string {
	a := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	b := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out bytes.Buffer
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(&out, "  %s\n", a[i])
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&out, "- %s\n", a[i])
			i++
		default:
			fmt.Fprintf(&out, "+ %s\n", b[j])
			j++
		}
	}
	return out.String()
}
