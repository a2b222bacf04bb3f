package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
)

// TestServeBrokerCommands: `isrbench serve --port 0` prints its admin address; `isrbench
// broker stop 1` stops broker 1 (fenced, out of the ISRs), `broker list` shows it, `broker
// start 1` brings it back; bad actions and ids are usage errors or name what was wrong.
func TestServeBrokerCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var serveErr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--brokers", "3", "--port", "0", "--data-dir", t.TempDir()}, pw, &serveErr)
		pw.Close()
	}()
	defer func() {
		cancel()
		go io.Copy(io.Discard, pr)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, serveErr.String())
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve did not stop")
		}
	}()
	var admin string
	sc := bufio.NewScanner(pr)
	for admin == "" && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "admin: http://"); ok {
			admin, _, _ = strings.Cut(rest, " ")
		}
	}
	if admin == "" {
		t.Fatalf("serve printed no admin address")
	}
	brokerCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), append([]string{"broker"}, append(args, "--admin", admin)...), &out, &errb), &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := brokerCmd("stop", "1")
	var st cluster.BrokerStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.ID != 1 || st.State != "stopped" || !st.Fenced {
		t.Fatalf("broker stop 1: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = brokerCmd("list")
	var all []cluster.BrokerStatus
	if err := json.Unmarshal([]byte(out), &all); code != 0 || err != nil || len(all) != 3 || all[1].State != "stopped" || all[0].State != "running" {
		t.Fatalf("broker list: exit %d, %q", code, out)
	}
	if code, _, errs := brokerCmd("stop", "1"); code != 1 || !strings.Contains(errs, "409") || !strings.Contains(errs, "already stopped") {
		t.Errorf("second stop: exit %d, %q", code, errs)
	}
	if code, _, errs := brokerCmd("stop", "9"); code != 1 || !strings.Contains(errs, "no broker 9") {
		t.Errorf("stop 9: exit %d, %q", code, errs)
	}
	if code, out, errs := brokerCmd("start", "1"); code != 0 || !strings.Contains(out, `"running"`) {
		t.Errorf("broker start 1: exit %d, %q %q", code, out, errs)
	}
	for _, bad := range [][]string{{"jump", "1"}, {"stop", "x"}, {"stop"}, {}, {"list", "extra"}} {
		if code, _, errs := brokerCmd(bad...); code != 2 {
			t.Errorf("broker %q: exit %d (want 2), %q", bad, code, errs)
		}
	}
}

// startServe runs `isrbench serve args...` until the test ends and returns the admin address
// it prints and what it wrote to stderr so far (a func).
func startServe(t *testing.T, args ...string) (string, func() string) {
	t.Helper()
	dataDir := t.TempDir() // before the cleanup below, so removed after serve stops
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var mu sync.Mutex
	var serveErr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--port", "0", "--data-dir", dataDir}, args...), pw, lockedWriter{&mu, &serveErr})
		pw.Close()
	}()
	stderr := func() string {
		mu.Lock()
		defer mu.Unlock()
		return serveErr.String()
	}
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, stderr())
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve did not stop")
		}
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "admin: http://"); ok {
			admin, _, _ := strings.Cut(rest, " ")
			go io.Copy(io.Discard, pr)
			return admin, stderr
		}
	}
	t.Fatalf("serve printed no admin address; stderr %q", stderr())
	return "", nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestServeAdminLoopbackAndToken: with --host 0.0.0.0 the brokers listen everywhere but the
// admin API stays on loopback; with --admin-token-file the API answers only requests with
// the token, which `isrbench broker --admin-token-file` reads from the same file.
func TestServeAdminLoopbackAndToken(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tok, []byte("Yh2k-serve-admin-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, stderr := startServe(t, "--brokers", "1", "--host", "0.0.0.0", "--admin-token-file", tok)
	if h, _, _ := net.SplitHostPort(admin); h != "127.0.0.1" {
		t.Fatalf("admin on %s with --host 0.0.0.0, want loopback", admin)
	}
	if strings.Contains(stderr(), "warning") {
		t.Errorf("warned on a loopback admin API with a token: %q", stderr())
	}
	broker := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), append([]string{"broker"}, append(args, "--admin", admin)...), &out, &errb), &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errs := broker("list"); code != 1 || !strings.Contains(errs, "401") || !strings.Contains(errs, "missing or wrong token") {
		t.Errorf("broker list without the token: exit %d %q", code, errs)
	}
	if code, out, errs := broker("list", "--admin-token-file", tok); code != 0 || !strings.Contains(out, `"running"`) {
		t.Errorf("broker list with the token: exit %d %q %q", code, out, errs)
	}
	if code, out, errs := broker("pause", "0", "--admin-token-file", tok); code != 0 || !strings.Contains(out, `"paused"`) {
		t.Errorf("broker pause with the token: exit %d %q %q", code, out, errs)
	}
	// curl-style requests: no token, a foreign Host, a browser's cross-origin POST.
	for _, h := range []map[string]string{
		{},
		{"Authorization": "Bearer Yh2k-serve-admin-token", "Host": "evil.example"},
		{"Authorization": "Bearer Yh2k-serve-admin-token", "Origin": "http://evil.example", "X-Isrbench": "1"},
	} {
		req, _ := http.NewRequest("POST", "http://"+admin+"/brokers/0/resume", nil)
		for k, v := range h {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("POST resume with %v: %d, want 401 or 403", h, resp.StatusCode)
		}
	}
	if code, out, _ := broker("list", "--admin-token-file", tok); code != 0 || !strings.Contains(out, `"paused"`) {
		t.Errorf("broker 0 after refused resumes: %q, want still paused", out)
	}
}

// TestServeWarnsOnExposedAdminWithoutToken: --admin 0.0.0.0:PORT without a token says so.
func TestServeWarnsOnExposedAdminWithoutToken(t *testing.T) {
	_, stderr := startServe(t, "--brokers", "1", "--admin", "0.0.0.0:0")
	if !strings.Contains(stderr(), "reachable from other machines without a token") {
		t.Errorf("stderr %q, want a warning", stderr())
	}
}

// TestServePprof: --pprof serves Go's profiles (the index and a CPU profile) while serve runs.
func TestServePprof(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--brokers", "1", "--port", "0", "--admin", "off", "--data-dir", t.TempDir(), "--pprof", "127.0.0.1:0"}, pw, &errb)
		pw.Close()
	}()
	var base string
	sc := bufio.NewScanner(pr)
	for base == "" && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "pprof: "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
	}
	go io.Copy(io.Discard, pr)
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve did not stop")
		}
	}()
	if base == "" {
		t.Fatal("serve printed no pprof address")
	}
	for _, path := range []string{"", "profile?seconds=1"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("GET %s%s: %s, %d bytes", base, path, resp.Status, len(body))
		}
	}
}

// TestServeBrokerUsage: bad serve and broker flags are usage errors (exit 2) before anything
// listens or dials.
func TestServeBrokerUsage(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--host", ""}, "--host is empty"},
		{[]string{"serve", "--admin", "bogus"}, `--admin "bogus": address bogus: missing port in address; want HOST:PORT`},
		{[]string{"serve", "--admin", ":10092"}, "no host"},
		{[]string{"serve", "--admin", "127.0.0.1:99999"}, "not a number in 0..65535"},
		{[]string{"serve", "--port", "65000", "--brokers", "1"}, "admin port would be --port 65000 + 1000"},
		{[]string{"serve", "--admin-token-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"serve", "--admin-token-file", empty}, "is empty"},
		{[]string{"serve", "--admin", "off", "--admin-token-file", empty}, "no admin API to protect"},
		{[]string{"serve", "--admin", "off", "--pprof", "6060"}, `--pprof "6060"`},
		{[]string{"serve", "--set", "queued.max.request.bytes=1048576"}, "queued.max.request.bytes 1048576 is smaller than socket.request.max.bytes 104857600"},
		{[]string{"serve", "--set", "connections.max.idle.ms=0"}, "connections.max.idle.ms: 0 is out of range; allowed -1 or 1.."},
		{[]string{"broker", "list", "--admin", ""}, "want HOST:PORT or http://HOST:PORT"},
		{[]string{"broker", "list", "--admin", "ftp://x:1"}, `scheme "ftp"`},
		{[]string{"broker", "list", "--admin", "127.0.0.1:0"}, "not a number in 1..65535"},
		{[]string{"broker", "list", "--admin-token-file", empty}, "is empty"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := exitCode(run(context.Background(), tc.args, &out, &errb), &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb.String(), tc.want)
			}
		})
	}
}
