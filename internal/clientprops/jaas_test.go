package clientprops

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want JAAS
	}{
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a;b=c";`,
			JAAS{PlainLoginModule, "required", map[string]string{"username": "alice", "password": "a;b=c"}}},
		{"org.apache.kafka.common.security.scram.ScramLoginModule  REQUIRED\n\tusername = bob  password='p\\'q\\\\' ;  ",
			JAAS{ScramLoginModule, "required", map[string]string{"username": "bob", "password": `p'q\`}}},
		{`x.Y optional tokenauth=true;`, JAAS{"x.Y", "optional", map[string]string{"tokenauth": "true"}}},
		{`x.Y sufficient;`, JAAS{"x.Y", "sufficient", map[string]string{}}},
	} {
		got, err := ParseJAAS(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseJAASRefuses(t *testing.T) {
	const pw = "SuperSecret42"
	for _, tc := range []struct{ in, want string }{
		{``, "no login module class"},
		{`x.Y`, "want a control flag"},
		{`x.Y mandatory;`, `control flag "mandatory"`},
		{`x.Y required username="u" password="` + pw + `"`, "does not end with ';'"},
		{`x.Y required username;`, `want key=value at character 22`},
		{`x.Y required password="` + pw + `"x;`, `key "password": its value is followed by more text`},
		{`x.Y required password="a"` + pw + `="b";`, `key "password": its value is followed by more text`},
		{`x.Y required password="` + pw, `key "password": unterminated`},
		{`x.Y required password=` + pw + ` password=` + pw + `;`, `key "password" given twice`},
		{`x.Y required password=` + pw + `; z.W required;`, "more than one login module"},
		{`x.Y required =` + pw + `;`, "want key=value"},
	} {
		_, err := ParseJAAS(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%q: the error shows the password: %v", tc.in, err)
		}
	}
}
