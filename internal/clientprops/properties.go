package clientprops

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// MaxFileBytes bounds a properties file: client properties are a few hundred bytes, and a
// larger file is a wrong path (a log, a binary) rather than a configuration.
const MaxFileBytes = 1 << 20

// Property is one key = value line of a properties file.
type Property struct {
	Key, Value string
	Line       int // 1-based line where the logical line starts (0: not from a file)
}

// Format prints key=value, the value as Hidden when IsSecret(key), whatever the verb.
func (p Property) Format(f fmt.State, _ rune) {
	v := p.Value
	if IsSecret(p.Key) {
		v = Hidden
	}
	io.WriteString(f, p.Key+"="+v)
}

// Props are the properties in file order; a key given twice keeps its last value, as
// java.util.Properties does (Get), while the slice keeps every line.
type Props []Property

// Get returns the last value of key and whether it was given.
func (p Props) Get(key string) (string, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].Key == key {
			return p[i].Value, true
		}
	}
	return "", false
}

// Map returns the properties as a map (the last value of each key).
func (p Props) Map() map[string]string {
	m := make(map[string]string, len(p))
	for _, pr := range p {
		m[pr.Key] = pr.Value
	}
	return m
}

// Load reads the properties file at path. Errors name the path and line, never a value.
func Load(path string) (Props, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("command config: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("command config %s: is a directory; want a .properties file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("command config %s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("command config %s: larger than %d bytes; want a .properties file", path, MaxFileBytes)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("command config %s: %w", path, err)
	}
	return p, nil
}

// Parse reads properties in the format of java.util.Properties.load: one key and value per
// logical line; lines whose first non-blank character is # or ! are comments; a line ending
// in an odd number of backslashes continues on the next (whose leading blanks are dropped);
// the key ends at the first unescaped =, : or blank, then blanks and one = or : are skipped;
// escapes \t \n \r \f \uXXXX, and \c for any other c is c. Java reads ISO 8859-1; isrbench
// reads UTF-8, which is the same for the ASCII that client properties are written in.
func Parse(b []byte) (Props, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("not UTF-8 text; want a .properties file")
	}
	var out Props
	lines := splitLines(string(b))
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: a trailing odd run of backslashes.
		for endsContinued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsContinued(line) { // the file ends inside a continuation: Java drops the backslash
			line = line[:len(line)-1]
		}
		k, v, err := splitKeyValue(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		out = append(out, Property{Key: k, Value: v, Line: start})
	}
	return out, nil
}

// splitLines splits at \n, \r\n and \r, as Java's LineReader.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

func endsContinued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits one logical line (leading blanks removed) into its unescaped key and
// value.
func splitKeyValue(line string) (string, string, error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the next character is escaped
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rawKey := line[:end]
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(rawKey)
	if err != nil {
		return "", "", fmt.Errorf("key: %w", err)
	}
	v, err := unescape(rest)
	if err != nil {
		// The value may be a secret: name the key, not the text.
		return "", "", fmt.Errorf("%s: %w", k, err)
	}
	return k, v, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if len(s)-(i+1) < 4 {
				return "", fmt.Errorf(`malformed \uxxxx escape: want 4 hex digits`)
			}
			var r rune
			for _, h := range s[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", fmt.Errorf(`malformed \uxxxx escape: want 4 hex digits`)
				}
				r = r<<4 | d
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func hexDigit(c rune) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
