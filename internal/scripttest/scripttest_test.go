package scripttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/internal/simflag"
)

const script = `# a story
set 3
----
x = 3

# two commands, the second without output yet
add 4 \
  5 # a comment
add 1
`

func handler(x *int) Handler {
	return func(t *testing.T, c *Cmd) string {
		switch c.Name {
		case "set":
			*x = len(c.Args[0]) + 2 // "3" -> 3
		case "add":
			for range c.Args {
				*x++
			}
		}
		return "x = " + strings.Repeat("|", 0) + itoa(*x) + "\n\n"
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestRewriteThenCheck: a rewrite records every command's output (a blank line after each
// block, continuation lines and comments kept), and the rewritten script then passes.
func TestRewriteThenCheck(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s.txt")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	*simflag.Rewrite = true
	var x int
	Run(t, f, handler(&x))
	*simflag.Rewrite = false
	got, _ := os.ReadFile(f)
	want := "# a story\nset 3\n----\nx = 3\n\n# two commands, the second without output yet\nadd 4 \\\n  5 # a comment\n----\nx = 5\n\nadd 1\n----\nx = 6\n"
	if string(got) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	steps, err := Parse(f, string(got))
	if err != nil || len(steps) != 3 || steps[1].Cmd.Line != "add 4 5" || steps[2].Output != "x = 6\n" {
		t.Fatalf("parse: %v %+v", err, steps)
	}
	x = 0
	Run(t, f, handler(&x))
}

// TestMismatchFails: an output that differs from the recording, or a missing one, fails.
func TestMismatchFails(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s.txt")
	for _, src := range []string{"set 3\n----\nx = 4\n", "set 3\n"} {
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		var x int
		// A T of its own records the failures without failing this test; its own
		// goroutine, since a Fatal ends the goroutine it runs on.
		ft := &testing.T{}
		done := make(chan struct{})
		go func() { defer close(done); Run(ft, f, handler(&x)) }()
		<-done
		if !ft.Failed() {
			t.Errorf("script %q passed", src)
		}
	}
}

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc\n", "a\nx\nc\n")
	if want := "  a\n- b\n+ x\n  c\n"; got != want {
		t.Fatalf("Diff:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{"----\nx\n", "cmd \\\n"} {
		if _, err := Parse("f.txt", src); err == nil || !strings.Contains(err.Error(), "f.txt:") {
			t.Errorf("Parse(%q) = %v, want an error naming the file and line", src, err)
		}
	}
}
