package iouring

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces the dependency rule: iouring imports only
// golang.org/x/sys/unix and the standard library (no cgo).
func TestImports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if path == "C" || (strings.Contains(first, ".") && path != "golang.org/x/sys/unix") {
				t.Errorf("%s imports %s: only golang.org/x/sys/unix and the standard library are allowed", name, path)
			}
		}
	}
}
