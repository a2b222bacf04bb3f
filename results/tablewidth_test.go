package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// tableLines returns the lines of out that belong to a table (box-drawing borders) and are
// wider than width characters (not bytes).
func wideTableLines(out string, width int) []string {
	var wide []string
	for _, l := range strings.Split(out, "\n") {
		if strings.ContainsAny(l, "┌│├└") && utf8.RuneCountInString(l) > width {
			wide = append(wide, l)
		}
	}
	return wide
}

// TestDefaultTablesFit: every table of the default outputs (run summary with the cost table,
// sweep, compare, gate: their golden files) fits DefaultTableWidth characters.
func TestDefaultTablesFit(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	gate, _ := filepath.Glob("../gate/testdata/*.golden")
	files = append(files, gate...)
	if len(files) < 5 || len(gate) == 0 {
		t.Fatalf("golden files: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if wide := wideTableLines(string(b), DefaultTableWidth); len(wide) > 0 {
			t.Errorf("%s: %d table lines wider than %d characters, the first %d: %s", f, len(wide), DefaultTableWidth, utf8.RuneCountInString(wide[0]), wide[0])
		}
	}
}

// TestTableFolds: a detail cell far wider than the terminal folds at spaces, keeps every word,
// and a wider terminal (SetTableWidth) shows more on a line; a word longer than the room
// stays whole.
func TestTableFolds(t *testing.T) {
	detail := strings.Repeat("the detail column of the cost table folds at spaces ", 8)
	render := func() string {
		var buf bytes.Buffer
		tb := newTable(&buf, 2, "cost per record", "value", "detail")
		tb.Append("cpu µs", "312.5", detail)
		tb.Append("unbreakable", "1", strings.Repeat("x", 30))
		if err := tb.Render(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	out := render()
	if wide := wideTableLines(out, DefaultTableWidth); len(wide) > 0 {
		t.Fatalf("table wider than %d:\n%s", DefaultTableWidth, out)
	}
	if got, want := strings.Count(out, "folds"), 8; got != want || !strings.Contains(out, strings.Repeat("x", 30)) {
		t.Fatalf("words lost in folding (%d of %d):\n%s", got, want, out)
	}
	defer SetTableWidth(0)
	SetTableWidth(200)
	wider := render()
	if wide := wideTableLines(wider, 200); len(wide) > 0 || len(wideTableLines(wider, DefaultTableWidth)) == 0 {
		t.Fatalf("a 200-character terminal should use its width:\n%s", wider)
	}
	if strings.Count(wider, "\n") >= strings.Count(out, "\n") {
		t.Fatalf("the wider table is not shorter:\n%s\n%s", wider, out)
	}
}

// TestFoldFillsLines: a column folded several times flows its words into full lines: no
// line of a folded cell could have taken the first word of the line after it (the words
// pushed off a line by each narrower fold are not left one per line).
func TestFoldFillsLines(t *testing.T) {
	detail := "request handlers working, not waiting (LocalTimeMs): produce 87.36, replica fetch 14.95, consumer fetch 4.551, follower apply 72.22"
	header := []string{"cost per acked record", "value", "detail"}
	rows := [][]string{{"local µs", "179.1", detail}, {"cluster syscalls", "4.050", "read 1.370, write 1.531, sendfile 0.002"}}
	fitTable(header, rows, 120)
	lines := strings.Split(rows[0][2], "\n")
	if len(lines) < 2 {
		t.Fatalf("not folded: %q", rows[0][2])
	}
	w := textWidth(rows[0][2])
	for i := 0; i+1 < len(lines); i++ {
		next := strings.Fields(lines[i+1])[0]
		if utf8.RuneCountInString(lines[i])+1+utf8.RuneCountInString(next) <= w {
			t.Errorf("line %q could take %q (column width %d): %q", lines[i], next, w, rows[0][2])
		}
	}
	if strings.Join(strings.Fields(rows[0][2]), " ") != detail {
		t.Errorf("folding changed the words: %q", rows[0][2])
	}
}
