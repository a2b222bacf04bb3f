package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/cluster"
)

func init() {
	register("broker", "stop, kill, crash, pause, resume or start one broker of `isrbench serve`; list them", cmdBroker)
}

// cmdBroker talks to the admin API of `isrbench serve`: `broker list` prints every broker's
// state, `broker ACTION ID` applies an action and prints the broker's new state.
func cmdBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("broker", "broker list | broker {"+strings.Join(cluster.Actions, "|")+"} ID [--admin HOST:PORT]", stderr)
	admin := addAdminFlags(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := admin.resolve("broker"); err != nil {
		return err
	}
	var method, path string
	switch {
	case len(rest) == 1 && rest[0] == "list":
		method, path = http.MethodGet, "/brokers"
	case len(rest) == 2 && slices.Contains(cluster.Actions, rest[0]):
		id, err := strconv.ParseInt(rest[1], 10, 32)
		if err != nil || id < 0 {
			return usagef("broker %s: broker id %q: want an integer >= 0", rest[0], rest[1])
		}
		method, path = http.MethodPost, fmt.Sprintf("/brokers/%d/%s", id, rest[0])
	case len(rest) >= 1 && rest[0] != "list" && !slices.Contains(cluster.Actions, rest[0]):
		return usagef("broker: unknown action %q (want list or one of %s)", rest[0], strings.Join(cluster.Actions, ", "))
	default:
		return usagef("broker: want `list` or `ACTION ID`, got %q", rest)
	}
	return admin.call(ctx, "broker", method, path, stdout)
}
