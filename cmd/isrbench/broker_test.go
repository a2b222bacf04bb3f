package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/netfetch"
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
	var st netfetch.BrokerStatus
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.ID != 1 || st.State != "stopped" || !st.Fenced {
		t.Fatalf("broker stop 1: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = brokerCmd("list")
	var all []netfetch.BrokerStatus
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
