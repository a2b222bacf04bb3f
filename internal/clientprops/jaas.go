package clientprops

import (
	"fmt"
	"strings"
)

// The login modules of sasl.jaas.config that isrbench reads, by Kafka's class names.
const (
	PlainLoginModule  = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule  = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthLoginModule  = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	AWSIAMLoginModule = "software.amazon.msk.auth.iam.IAMLoginModule"
)

// JAAS is one login module entry of sasl.jaas.config.
type JAAS struct {
	Module  string            // the login module class
	Flag    string            // required, requisite, sufficient or optional
	Options map[string]string // key=value options; values may be secrets: never print them
}

// ParseJAAS reads sasl.jaas.config as Kafka's JaasConfig does for a client: exactly one
// entry "<LoginModule> <flag> key=value ... ;" where a value is a word or a quoted string
// ("..." or '...', with backslash escapes). Errors name the option, never a value.
func ParseJAAS(s string) (JAAS, error) {
	t := jaasTokenizer{s: s}
	var j JAAS
	tok, ok := t.word()
	if !ok {
		return j, fmt.Errorf("sasl.jaas.config: want \"<LoginModule> required key=\\\"value\\\" ... ;\", got no login module class")
	}
	j.Module = tok
	if j.Flag, ok = t.word(); !ok {
		return j, fmt.Errorf("sasl.jaas.config: login module %s: want a control flag (required, requisite, sufficient or optional)", j.Module)
	}
	switch strings.ToLower(j.Flag) {
	case "required", "requisite", "sufficient", "optional":
		j.Flag = strings.ToLower(j.Flag)
	default:
		return j, fmt.Errorf("sasl.jaas.config: login module %s: control flag %q; allowed required, requisite, sufficient or optional", j.Module, j.Flag)
	}
	j.Options = map[string]string{}
	for {
		t.skipSpace()
		if t.eof() {
			return j, fmt.Errorf("sasl.jaas.config: login module %s: the entry does not end with ';'", j.Module)
		}
		if t.peek() == ';' {
			t.i++
			break
		}
		key, ok := t.word()
		if !ok {
			return j, fmt.Errorf("sasl.jaas.config: login module %s: want key=value or ';' at character %d", j.Module, t.i+1)
		}
		t.skipSpace()
		if t.eof() || t.peek() != '=' {
			// Not named: a word that is not followed by = may be the tail of a value.
			return j, fmt.Errorf("sasl.jaas.config: login module %s: want key=value at character %d (a value not specified, or a quote inside a value that is not escaped as \\\")", j.Module, t.i+1)
		}
		t.i++
		val, err := t.value()
		if err != nil {
			return j, fmt.Errorf("sasl.jaas.config: key %q: %w", key, err)
		}
		if !t.eof() && isWordByte(t.peek()) || !t.eof() && (t.peek() == '"' || t.peek() == '\'') {
			return j, fmt.Errorf("sasl.jaas.config: key %q: its value is followed by more text without a blank (a quote inside a quoted value is escaped as \\\")", key)
		}
		if _, dup := j.Options[key]; dup {
			return j, fmt.Errorf("sasl.jaas.config: key %q given twice", key)
		}
		j.Options[key] = val
	}
	t.skipSpace()
	if !t.eof() {
		return j, fmt.Errorf("sasl.jaas.config: more than one login module entry; a client takes exactly one")
	}
	return j, nil
}

type jaasTokenizer struct {
	s string
	i int
}

func (t *jaasTokenizer) eof() bool  { return t.i >= len(t.s) }
func (t *jaasTokenizer) peek() byte { return t.s[t.i] }

func (t *jaasTokenizer) skipSpace() {
	for !t.eof() && (t.s[t.i] == ' ' || t.s[t.i] == '\t' || t.s[t.i] == '\n' || t.s[t.i] == '\r' || t.s[t.i] == '\f') {
		t.i++
	}
}

func isWordByte(c byte) bool {
	return c > ' ' && c != '=' && c != ';' && c != '"' && c != '\'' && c != 0x7f
}

// word reads a run of word characters after blanks.
func (t *jaasTokenizer) word() (string, bool) {
	t.skipSpace()
	start := t.i
	for !t.eof() && isWordByte(t.s[t.i]) {
		t.i++
	}
	return t.s[start:t.i], t.i > start
}

// value reads a quoted string or a word.
func (t *jaasTokenizer) value() (string, error) {
	t.skipSpace()
	if t.eof() {
		return "", fmt.Errorf("no value")
	}
	q := t.peek()
	if q != '"' && q != '\'' {
		w, ok := t.word()
		if !ok {
			return "", fmt.Errorf("no value")
		}
		return w, nil
	}
	t.i++
	var b strings.Builder
	for ; !t.eof(); t.i++ {
		c := t.s[t.i]
		switch {
		case c == q:
			t.i++
			return b.String(), nil
		case c == '\\' && t.i+1 < len(t.s):
			t.i++
			switch e := t.s[t.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated quoted value")
}
