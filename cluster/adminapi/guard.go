package adminapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/valyala/fasthttp"
)

// The admin API's defences against a web page open in a browser on the same machine (a
// browser sends requests to 127.0.0.1 for any page that asks), and, with a token, against
// anyone else who can reach it:
//
//   - Host: a request whose Host header is not an address of the listener is refused (403),
//     which defeats DNS rebinding (a page whose name resolves to 127.0.0.1 sends its own
//     name). Allowed: the listen address itself; for a loopback listener also localhost,
//     127.0.0.1 and [::1] with the port; for a wildcard listener (0.0.0.0, ::) any IP
//     literal, localhost and the machine's host name, with the port.
//   - State-changing requests (POST): refused (403) with an Origin header that is not one of
//     those addresses (or "null"), with Sec-Fetch-Site cross-site or same-site, and unless
//     they carry "X-Isrbench: 1" or Content-Type application/json, which a page can only
//     send after a CORS preflight (OPTIONS) that this API never grants.
//   - Token (Config.Token, `isrbench serve --admin-token-file`): every request needs
//     "Authorization: Bearer <token>" (401 otherwise), compared in constant time.

// Header is the header (with value "1") a state-changing admin request must carry
// unless its Content-Type is application/json.
const Header = "X-Isrbench"

// maxAdminTokenBytes bounds an admin token file.
const maxAdminTokenBytes = 4096

// ReadToken reads a bearer token from path (`--admin-token-file`): the file's content
// without surrounding white space; empty, over 4096 bytes, or holding white space or control
// characters inside is an error.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAdminTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("admin token file %s: %w", path, err)
	}
	if len(b) > maxAdminTokenBytes {
		return "", fmt.Errorf("admin token file %s: longer than %d bytes; want one line with the token", path, maxAdminTokenBytes)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("admin token file %s is empty; want one line with the token", path)
	}
	if i := strings.IndexFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }); i >= 0 {
		return "", fmt.Errorf("admin token file %s: the token has white space, a control or a non-ASCII character at byte %d; want one line of printable ASCII", path, i)
	}
	return tok, nil
}

// hostSet is the Host values a listener answers to (lower case, with port).
type hostSet struct {
	exact    map[string]bool
	port     string
	wildcard bool // any IP literal with port
}

// hostsFor returns the Host values allowed for a listener on addr.
func hostsFor(addr net.Addr) hostSet {
	hs := hostSet{exact: map[string]bool{}}
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		hs.exact[strings.ToLower(addr.String())] = true
		return hs
	}
	hs.port = strconv.Itoa(ta.Port)
	add := func(host string) {
		hs.exact[strings.ToLower(net.JoinHostPort(host, hs.port))] = true
		if hs.port == "80" {
			hs.exact[strings.ToLower(host)] = true
		}
	}
	add(ta.IP.String())
	switch {
	case ta.IP.IsLoopback():
		add("localhost")
		add("127.0.0.1")
		add("::1")
	case ta.IP.IsUnspecified():
		hs.wildcard = true
		add("localhost")
		if name, err := os.Hostname(); err == nil && name != "" {
			add(name)
		}
	}
	return hs
}

func (hs hostSet) allows(host string) bool {
	host = strings.ToLower(host)
	if hs.exact[host] {
		return true
	}
	if !hs.wildcard {
		return false
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.Trim(host, "[]"), "80"
	}
	return p == hs.port && net.ParseIP(h) != nil
}

func (hs hostSet) String() string {
	s := make([]string, 0, len(hs.exact)+1)
	for h := range hs.exact {
		s = append(s, h)
	}
	slices.Sort(s)
	if hs.wildcard {
		s = append(s, "any IP address:"+hs.port)
	}
	return strings.Join(s, ", ")
}

// errGuard is a refused admin request: the status and the text answered.
type errGuard struct {
	code int
	msg  string
}

func (e *errGuard) Error() string { return e.msg }

// guard checks a request against the Host, token, Origin and header rules; nil = allowed.
func (a *Server) guard(ctx *fasthttp.RequestCtx) error {
	hs := *a.hosts.Load()
	host := string(ctx.Request.Header.Host())
	if host == "" {
		return &errGuard{fasthttp.StatusForbidden, fmt.Sprintf("no Host header; allowed: %s", hs)}
	}
	if !hs.allows(host) {
		return &errGuard{fasthttp.StatusForbidden, fmt.Sprintf("Host %q is not this admin API's address; allowed: %s", host, hs)}
	}
	if a.tokenSum != nil {
		auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
		tok, ok := bytes.CutPrefix(auth, []byte("Bearer "))
		sum := sha256.Sum256(tok)
		if !ok || subtle.ConstantTimeCompare(sum[:], a.tokenSum) != 1 {
			ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="isrbench-admin"`)
			return &errGuard{fasthttp.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <the token of --admin-token-file> (isrbench broker --admin-token-file FILE)"}
		}
	}
	if ctx.IsGet() || ctx.IsHead() {
		return nil
	}
	// Anything else may change state (POST /brokers/<id>/<action>).
	if origin := ctx.Request.Header.Peek("Origin"); origin != nil {
		u, err := url.Parse(string(origin))
		if err != nil || u.Scheme != "http" || !hs.allows(u.Host) {
			return &errGuard{fasthttp.StatusForbidden, fmt.Sprintf("Origin %q is foreign; a state-changing request is accepted only from this admin API's own origin", origin)}
		}
	}
	switch string(ctx.Request.Header.Peek("Sec-Fetch-Site")) {
	case "cross-site", "same-site":
		return &errGuard{fasthttp.StatusForbidden, "Sec-Fetch-Site says this request comes from another site; refused"}
	}
	ct, _, _ := strings.Cut(string(ctx.Request.Header.ContentType()), ";")
	if string(ctx.Request.Header.Peek(Header)) != "1" && !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		return &errGuard{fasthttp.StatusForbidden, fmt.Sprintf("%s %s needs the header %q (or Content-Type: application/json), which a web page cannot send without asking first: curl -X POST -H '%s: 1' ...",
			ctx.Method(), ctx.Path(), Header+": 1", Header)}
	}
	return nil
}

// refuse answers a request the guard refused.
func refuse(ctx *fasthttp.RequestCtx, err error) {
	var ge *errGuard
	if !errors.As(err, &ge) {
		ge = &errGuard{fasthttp.StatusForbidden, err.Error()}
	}
	ctx.Error(ge.msg+"\n", ge.code)
}
