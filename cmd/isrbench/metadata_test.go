package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
)

// TestMetadataCommand: `isrbench metadata` on a `serve` data directory reports a batch
// damaged in both copies with its file and offset and exits 1 without changing anything;
// --repair cuts it there and lists what the cut loses; a start then loads the rest.
func TestMetadataCommand(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "metadata")
	c, _, err := controller.Open(controller.Config{Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(controller.Registration{ID: 0, Host: "127.0.0.1", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic("kept", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "metadata-0.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	damageAt := fi.Size()
	if _, err := c.CreateTopic("lost", 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic("after", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, p := range []string{logPath, logPath + ".mirror"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[damageAt+20] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	metadata := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := exitCode(run(context.Background(), append([]string{"metadata"}, args...), &out, &errb), &errb)
		return code, out.String() + errb.String()
	}
	code, out := metadata("--dir", data)
	if code != 1 || !strings.Contains(out, "metadata-0.log: DAMAGED at offset "+strconv.FormatInt(damageAt, 10)) || !strings.Contains(out, "--repair") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	if _, _, err := controller.Open(controller.Config{Dir: dir, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "isrbench metadata --dir") {
		t.Fatalf("Open of the damaged log: %v", err)
	}
	code, out = metadata("--dir", data, "--repair")
	for _, want := range []string{"repaired: cut", "lost: the damaged batch at offset " + strconv.FormatInt(damageAt, 10), "lost: topic after (1 partitions)", "lost: partition after-0"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("repair: exit %d, output does not say %q:\n%s", code, want, out)
		}
	}
	if code, out = metadata("--dir", dir); code != 0 || !strings.Contains(out, "a start would load it") {
		t.Errorf("after the repair: exit %d\n%s", code, out)
	}
	c2, _, err := controller.Open(controller.Config{Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := strings.Join(c2.Topics(), ","); got != "kept" {
		t.Errorf("topics after the repair: %s", got)
	}
	if code, out := metadata(); code != 2 || !strings.Contains(out, "--dir DIR is required") {
		t.Errorf("no --dir: exit %d %s", code, out)
	}
}
