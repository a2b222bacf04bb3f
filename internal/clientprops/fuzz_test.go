package clientprops

import (
	"strings"
	"testing"
)

// FuzzParse: any bytes give properties or an error, never a panic; a parsed file's keys and
// values survive being written back (escaped) and read again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a=b", "a\\\n b", `k\u0041=v\t`, "# c\n!c\nx:y", "a=\\", "\\u12"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		var out strings.Builder
		for _, pr := range p {
			out.WriteString(escapeProp(pr.Key, true) + "=" + escapeProp(pr.Value, false) + "\n")
		}
		q, err := Parse([]byte(out.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out.String(), err)
		}
		if len(q) != len(p) {
			t.Fatalf("re-parse: %d properties, want %d", len(q), len(p))
		}
		for i := range p {
			if p[i].Key != q[i].Key || p[i].Value != q[i].Value {
				t.Fatalf("re-parse %d: %q=%q, want %q=%q", i, q[i].Key, q[i].Value, p[i].Key, p[i].Value)
			}
		}
	})
}

// escapeProp writes s as java.util.Properties.store would.
func escapeProp(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case strings.ContainsRune(`=:#!\`, r):
			b.WriteString(`\` + string(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// FuzzParseJAAS: any text gives an entry or an error, never a panic; an error never holds
// the text of a quoted value.
func FuzzParseJAAS(f *testing.F) {
	for _, s := range []string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";`,
		`m required k='v\'';`, `m optional;`, `m required k=`, `m required "`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err != nil {
			const pw = "QQsecretQQ"
			if _, err2 := ParseJAAS(strings.ReplaceAll(s, `"`, `"`+pw)); err2 != nil && strings.Contains(err2.Error(), pw) {
				t.Fatalf("error shows a quoted value: %v", err2)
			}
			return
		}
		if j.Module == "" || j.Flag == "" {
			t.Fatalf("parsed without module or flag: %#v", j)
		}
	})
}
