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
		{[]string{"topics", "--describe", "--timeout", "0s"}, "--timeout 0s: want a duration > 0"},
		{[]string{"topics", "--describe", "--timeout", "-5s"}, "--timeout -5s: want a duration > 0"},
		{[]string{"topics", "--describe", "--bootstrap", ""}, `"" is not host:port`},
		{[]string{"topics", "--describe", "--bootstrap", "a:b:c"}, `"a:b:c" is not host:port`},
		{[]string{"topics", "--describe", "--bootstrap", "h:99999"}, `port "99999" is not a number in 1..65535`},
		{[]string{"topics", "--describe", "--partitions", "3"}, "--partitions apply only with --create"},
		{[]string{"topics", "--describe", "--config", "a=b", "--replication-factor", "2"}, "--config, --replication-factor apply only with --create"},
		{[]string{"topics", "--create", "--topic", "t", "--under-replicated-partitions"}, "--under-replicated-partitions apply only with --describe"},
		{[]string{"topics", "--create", "--topic", "bad topic"}, `--topic "bad topic": a topic name is 1..249 characters`},
		{[]string{"topics", "--describe", "--topic", ".."}, "not . or .."},
		{[]string{"offsets", "--topic", "a/b"}, "a topic name is"},
		{[]string{"offsets", "--topic", "t", "--timeout", "0s"}, "want a duration > 0"},
		{[]string{"offsets", "--topic", "t", "--bootstrap", "127.0.0.1:9092,"}, `"" is not host:port`},
		{[]string{"topics", "--create", "--delete", "--topic", "t"}, "exactly one of --describe, --create, --alter or --delete"},
		{[]string{"topics", "--delete"}, "--alter and --delete need --topic"},
		{[]string{"topics", "--alter", "--topic", "t"}, "--alter needs --partitions N"},
		{[]string{"topics", "--alter", "--topic", "t", "--partitions", "0"}, "--partitions 0: want 1.."},
		{[]string{"topics", "--alter", "--topic", "t", "--config", "novalue"}, "want key=value"},
		{[]string{"configs", "--describe"}, "--entity-type \"\": want topics, brokers or users"},
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
