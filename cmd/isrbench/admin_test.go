package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestAdminCommandsUsage: offsets and topics reject stray arguments and
// out-of-range sizes with a usage error (exit 2) before any network I/O.
func TestAdminCommandsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"offsets", "--topic", "t", "extra"}, "unexpected arguments"},
		{[]string{"offsets"}, "--topic is required"},
		{[]string{"topics", "--describe", "t"}, "unexpected arguments"},
		{[]string{"topics", "--create", "--topic", "t", "--partitions", "4294967297"}, "want 1..2147483647"},
		{[]string{"topics", "--create", "--topic", "t", "--replication-factor", "40000"}, "want 1..2147483647 / 1..32767"},
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
