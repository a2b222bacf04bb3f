package adminapi

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestAdminRefusesForeignHost: the admin API answers only requests that name its own
// address (DNS rebinding sends the attacker's name): the listen address and, on loopback,
// localhost, 127.0.0.1 and [::1] with the port. curl's GETs keep working.
func TestAdminRefusesForeignHost(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	base := startAdmin(t, c)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	for _, tc := range []struct {
		host string
		code int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST:" + port, 200},
		{"[::1]:" + port, 200},
		{"evil.example:" + port, 403},
		{"rebind.attacker.example", 403},
		{"localhost:1", 403},
		{"127.0.0.2:" + port, 403},
	} {
		for _, path := range []string{"/metrics", "/brokers"} {
			code, body := httpDoWith(t, "GET", base+path, map[string]string{"Host": tc.host})
			if code != tc.code {
				t.Errorf("GET %s with Host %q: %d %q, want %d", path, tc.host, code, body, tc.code)
			}
			if code == 403 && !strings.Contains(body, "is not this admin API's address; allowed: 127.0.0.1:"+port) {
				t.Errorf("GET %s with Host %q: %q, want the allowed addresses named", path, tc.host, body)
			}
		}
	}
	// HTTP/1.0 without a Host header.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	conn.Write([]byte("GET /metrics HTTP/1.0\r\n\r\n"))
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil || resp.StatusCode() != 403 || !bytes.Contains(resp.Body(), []byte("no Host header")) {
		t.Errorf("no Host: %v %d %q", err, resp.StatusCode(), resp.Body())
	}
}

// TestAdminRefusesCrossOriginPost is the attack of a web page: a POST that a browser sends
// for a page from another origin (an Origin header, Sec-Fetch-Site cross-site, a form's
// content type, no custom header) is refused and the broker keeps running; the same action
// with X-Isrbench: 1 or a JSON content type from the API's own origin is applied.
func TestAdminRefusesCrossOriginPost(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	base := startAdmin(t, c)
	self := strings.TrimPrefix(base, "http://")
	_, port, _ := net.SplitHostPort(self)
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"the issue's request", map[string]string{"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": form}, "is not this admin API's address"},
		{"foreign origin", map[string]string{"Origin": "http://evil.example", Header: "1"}, `Origin "http://evil.example" is foreign`},
		{"foreign origin on the same host", map[string]string{"Origin": "http://127.0.0.1:1", Header: "1"}, "is foreign"},
		{"https origin", map[string]string{"Origin": "https://" + self, Header: "1"}, "is foreign"},
		{"null origin", map[string]string{"Origin": "null", Header: "1"}, `Origin "null" is foreign`},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site", Header: "1"}, "Sec-Fetch-Site"},
		{"form post", map[string]string{"Content-Type": form}, `needs the header "X-Isrbench: 1"`},
		{"no header", nil, `needs the header "X-Isrbench: 1"`},
		{"wrong header value", map[string]string{Header: "yes"}, `needs the header "X-Isrbench: 1"`},
	} {
		code, body := httpDoWith(t, "POST", base+"/brokers/2/pause", tc.headers)
		if code != 403 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 403 and %q", tc.name, code, body, tc.want)
		}
		if st, _ := c.BrokerState(2); st != "running" {
			t.Fatalf("%s: broker 2 is %s after a refused request", tc.name, st)
		}
	}
	for _, h := range []map[string]string{
		{Header: "1", "Origin": "http://localhost:" + port, "Host": "localhost:" + port, "Sec-Fetch-Site": "same-origin"},
		{"Content-Type": "application/json; charset=utf-8"},
	} {
		code, body := httpDoWith(t, "POST", base+"/brokers/2/pause", h)
		if code != 200 || !strings.Contains(body, `"state": "paused"`) {
			t.Fatalf("POST pause with %v: %d %q", h, code, body)
		}
		if code, body := httpDo(t, "POST", base+"/brokers/2/resume"); code != 200 {
			t.Fatalf("resume: %d %q", code, body)
		}
	}
	// A preflight is never granted: no CORS header, 405.
	req, _ := http.NewRequest("OPTIONS", base+"/brokers/2/pause", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight: %d, Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestAdminToken: with a token every request needs it as a bearer token (401 with
// WWW-Authenticate otherwise); with it, GETs and actions work.
func TestAdminToken(t *testing.T) {
	c := clustertest.Start(t, 2, nil)
	const tok = "k3Xq9-token-for-the-admin-api"
	base := startAdminWith(t, c, Config{Token: tok}, "127.0.0.1:0")
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "bearer " + tok, "Basic " + tok, "Bearer " + tok + "x", "Bearer " + tok[:len(tok)-1]} {
		h := map[string]string{Header: "1"}
		if auth != "" {
			h["Authorization"] = auth
		}
		for _, r := range []struct{ method, path string }{{"GET", "/metrics"}, {"GET", "/brokers"}, {"POST", "/brokers/1/pause"}} {
			code, body := httpDoWith(t, r.method, base+r.path, h)
			if code != 401 || !strings.Contains(body, "missing or wrong token") {
				t.Errorf("%s %s with Authorization %q: %d %q, want 401", r.method, r.path, auth, code, body)
			}
		}
	}
	if st, _ := c.BrokerState(1); st != "running" {
		t.Fatalf("broker 1 is %s after refused requests", st)
	}
	good := map[string]string{"Authorization": "Bearer " + tok}
	if code, body := httpDoWith(t, "GET", base+"/metrics", good); code != 200 || !strings.Contains(body, "isrbench_broker_up") {
		t.Errorf("GET /metrics with the token: %d %q", code, body)
	}
	good[Header] = "1"
	if code, body := httpDoWith(t, "POST", base+"/brokers/1/pause", good); code != 200 || !strings.Contains(body, "paused") {
		t.Errorf("POST pause with the token: %d %q", code, body)
	}
	// A foreign Host is refused before the token is looked at.
	good["Host"] = "evil.example"
	if code, _ := httpDoWith(t, "GET", base+"/metrics", good); code != 403 {
		t.Errorf("foreign Host with the token: %d, want 403", code)
	}
}

// TestAdminHostsFor: the Host values a listener answers to, by the kind of address it has.
func TestAdminHostsFor(t *testing.T) {
	name, _ := os.Hostname()
	for _, tc := range []struct {
		addr      string
		allow     []string
		refuse    []string
		wildcards bool
	}{
		{"127.0.0.1:10092", []string{"127.0.0.1:10092", "localhost:10092", "[::1]:10092"}, []string{"10.0.0.1:10092", "evil:10092", "127.0.0.1:10093", "127.0.0.1", "localhost"}, false},
		{"[::1]:7000", []string{"[::1]:7000", "localhost:7000", "127.0.0.1:7000"}, []string{"[::2]:7000", "::1"}, false},
		{"10.1.2.3:10092", []string{"10.1.2.3:10092"}, []string{"localhost:10092", "127.0.0.1:10092", "10.1.2.3:80"}, false},
		{"0.0.0.0:10092", []string{"10.1.2.3:10092", "[fe80::1]:10092", "localhost:10092", name + ":10092"}, []string{"evil.example:10092", "10.1.2.3:10093", "10.1.2.3"}, true},
		{"127.0.0.1:80", []string{"127.0.0.1", "localhost", "127.0.0.1:80"}, []string{"evil"}, false},
	} {
		ta, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		hs := hostsFor(ta)
		for _, h := range tc.allow {
			if !hs.allows(h) {
				t.Errorf("listener %s refuses Host %q (allowed: %s)", tc.addr, h, hs)
			}
		}
		for _, h := range tc.refuse {
			if hs.allows(h) {
				t.Errorf("listener %s allows Host %q", tc.addr, h)
			}
		}
	}
}

func TestReadAdminToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content, want, err string
	}{
		{"abc123\n", "abc123", ""},
		{"  s3cr3t-token \r\n", "s3cr3t-token", ""},
		{"", "", "is empty"},
		{" \n\t", "", "is empty"},
		{"two words", "", "white space, a control or a non-ASCII character at byte 3"},
		{"line1\nline2", "", "white space"},
		{"tök", "", "non-ASCII"},
		{strings.Repeat("x", 5000), "", "longer than 4096 bytes"},
	} {
		p := filepath.Join(dir, "token")
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadToken(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %q, %v; want an error with %q", tc.content, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.content, got, err, tc.want)
		}
	}
	if _, err := ReadToken(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}
