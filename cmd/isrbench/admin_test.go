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
		{[]string{"topics", "--create", "--delete", "--topic", "t"}, "exactly one of --describe, --create, --alter or --delete"},
		{[]string{"topics", "--delete"}, "--alter and --delete need --topic"},
		{[]string{"topics", "--alter", "--topic", "t"}, "--alter needs --partitions N"},
		{[]string{"topics", "--alter", "--topic", "t", "--partitions", "0"}, "--partitions 0: want 1.."},
		{[]string{"topics", "--alter", "--topic", "t", "--config", "novalue"}, "want key=value"},
		{[]string{"configs", "--describe"}, "--entity-type \"\": want topics or brokers"},
		{[]string{"configs", "--describe", "--alter", "--entity-type", "topics"}, "exactly one of --describe or --alter"},
		{[]string{"configs", "--describe", "--entity-type", "topics"}, "needs --entity-name TOPIC"},
		{[]string{"configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--entity-default"}, "exactly one of --entity-name ID or --entity-default"},
		{[]string{"configs", "--describe", "--entity-type", "brokers", "--entity-name", "x"}, "a broker id is an integer"},
		{[]string{"configs", "--alter", "--entity-type", "brokers", "--entity-default"}, "--alter needs --add-config"},
		{[]string{"configs", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "k"}, "want key=value"},
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
