package adminapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// FuzzAdminHTTP writes arbitrary bytes to the admin API of a 2-broker cluster (with a token)
// over a real connection. The server must answer or close, never panic; whatever the bytes,
// memory stays bounded (request line and headers over 4 KiB get 431, bodies over 1 KiB are
// refused, at most 1 MiB is read back); and when the input parses as a request that lacks an
// allowed Host or the token, or is a POST from a foreign Origin or without X-Isrbench: 1 or
// a JSON content type, its answer is not a success.
func FuzzAdminHTTP(f *testing.F) {
	c := clustertest.Start(f, 2, func(cfg *cluster.Config) { cfg.Logf = func(string, ...any) {} })
	const tok = "fuzz-token"
	base := startAdminWith(f, c, Config{Token: tok}, "127.0.0.1:0")
	addr := strings.TrimPrefix(base, "http://")
	hs := hostsFor(mustTCPAddr(f, addr))
	for _, seed := range []string{
		"GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\n\r\n",
		"GET /brokers HTTP/1.1\r\nHost: localhost:" + addr[strings.LastIndexByte(addr, ':')+1:] + "\r\nAuthorization: Bearer " + tok + "\r\n\r\n",
		"POST /brokers/1/pause HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\nX-Isrbench: 1\r\nContent-Length: 0\r\n\r\n",
		"POST /brokers/1/resume HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"POST /brokers/1/pause HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=b",
		"POST /brokers/0/stop HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\nOrigin: null\r\nX-Isrbench: 1\r\n\r\n",
		"GET /metrics HTTP/1.0\r\n\r\n",
		"OPTIONS /brokers/0/stop HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n",
		"GET http://evil.example/metrics HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + tok + "\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nHost: " + addr + "\r\nHost: evil.example\r\nAuthorization: Bearer " + tok + "\r\n\r\n",
		"GET /" + strings.Repeat("a", 5000) + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n",
		"POST /brokers/1/start HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 999999999\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write(data)
		conn.(*net.TCPConn).CloseWrite()
		answer, _ := io.ReadAll(io.LimitReader(conn, 1<<20))
		if len(answer) == 1<<20 {
			t.Fatalf("more than 1 MiB answered to %d bytes", len(data))
		}
		var req fasthttp.Request
		if err := req.ReadLimitBody(bufio.NewReader(bytes.NewReader(data)), 64<<10); err != nil {
			return // not a request: the server's answer (an error or nothing) is all we check
		}
		var resp fasthttp.Response
		if err := resp.ReadLimitBody(bufio.NewReader(bytes.NewReader(answer)), 1<<20); err != nil {
			return // closed without a full answer (e.g. the request was cut short)
		}
		code := resp.StatusCode()
		if code < 200 || code >= 300 {
			return
		}
		h := &req.Header
		why := ""
		switch {
		case !hs.allows(string(h.Host())):
			why = "a foreign Host"
		case string(h.Peek("Authorization")) != "Bearer "+tok:
			why = "no token"
		case !req.Header.IsGet() && !req.Header.IsHead() && string(h.Peek(Header)) != "1" &&
			!strings.HasPrefix(strings.ToLower(strings.TrimSpace(string(h.ContentType()))), "application/json"):
			why = "a POST without X-Isrbench: 1 or JSON"
		case !req.Header.IsGet() && !req.Header.IsHead() && h.Peek("Origin") != nil &&
			string(h.Peek("Origin")) != "http://"+string(h.Host()) && !hs.allows(strings.TrimPrefix(string(h.Peek("Origin")), "http://")):
			why = "a POST from a foreign Origin"
		}
		if why != "" {
			t.Fatalf("request with %s answered %d:\n%q\nanswer:\n%q", why, code, data, answer)
		}
	})
}

func mustTCPAddr(t testing.TB, addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
