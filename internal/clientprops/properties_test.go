package clientprops

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Property
	}{
		{"empty", "", nil},
		{"comments and blanks", "# a comment\n! another\n\n   \n", nil},
		{"equals", "security.protocol=SASL_SSL", []Property{{"security.protocol", "SASL_SSL", 1}}},
		{"colon and blanks", "  sasl.mechanism : SCRAM-SHA-512  ", []Property{{"sasl.mechanism", "SCRAM-SHA-512  ", 1}}},
		{"blank separator", "a b c", []Property{{"a", "b c", 1}}},
		{"empty value", "ssl.endpoint.identification.algorithm=\n", []Property{{"ssl.endpoint.identification.algorithm", "", 1}}},
		{"key only", "flag", []Property{{"flag", "", 1}}},
		{"second separator kept", "a==b", []Property{{"a", "=b", 1}}},
		{"escaped key", `a\=b\ c=d`, []Property{{"a=b c", "d", 1}}},
		{"escapes", `v=a\tb\nc\\d\u0041\:`, []Property{{"v", "a\tb\nc\\dA:", 1}}},
		{"continuation", "sasl.jaas.config=org.Foo required \\\n    username=\"u\" \\\n    password=\"p\";\nnext=1",
			[]Property{{"sasl.jaas.config", `org.Foo required username="u" password="p";`, 1}, {"next", "1", 4}}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", []Property{{"a", `x\`, 1}, {"b", "y", 2}}},
		{"continuation at the end", "a=x\\", []Property{{"a", "x", 1}}},
		{"CRLF and CR", "a=1\r\nb=2\rc=3", []Property{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}}},
		{"comment after continuation is text", "a=1\\\n#2", []Property{{"a", "1#2", 1}}},
		{"duplicate kept in order", "a=1\na=2", []Property{{"a", "1", 1}, {"a", "2", 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual([]Property(got), tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	p, _ := Parse([]byte("a=1\na=2"))
	if v, _ := p.Get("a"); v != "2" {
		t.Fatalf("Get: last value wins as in java.util.Properties, got %q", v)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad unicode escape", `sasl.password=ab\u12`, `line 1: sasl.password: malformed \uxxxx`},
		{"bad hex", `k\uZZZZ=1`, `line 1: key: malformed`},
		{"not utf-8", "a=\xff\xfe", "not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "ab") && tc.name == "bad unicode escape" {
				t.Fatalf("error shows the value: %v", err)
			}
		})
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{dir, "is a directory"},
		{big, "larger than"},
	} {
		if _, err := Load(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
}
