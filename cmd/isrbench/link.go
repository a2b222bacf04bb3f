package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/cluster/adminapi"
)

func init() {
	register("link", "slow down, cut or heal one broker's replica links in `isrbench serve`; list faulty links", cmdLink)
}

// cmdLink talks to the admin API of `isrbench serve`: `link list` prints the faulty replica
// links, `link slow ID --latency D [--jitter D] [--bandwidth N]`, `link down ID` and `link
// heal ID` change every replica link between broker ID and the others (both directions).
func cmdLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("link", "link list | link slow ID --latency D [--jitter D] [--bandwidth BYTES/S] | link {down|heal} ID [--admin HOST:PORT]", stderr)
	admin := addAdminFlags(fs)
	latency := fs.Duration("latency", 0, "slow: added per request direction (the round trip grows by twice it)")
	jitter := fs.Duration("jitter", 0, "slow: up to this much more latency, uniformly random")
	bandwidth := fs.Int64("bandwidth", 0, "slow: bytes/s per connection and direction (0 = unlimited)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := admin.resolve("link"); err != nil {
		return err
	}
	var method, path string
	switch {
	case len(rest) == 1 && rest[0] == "list":
		method, path = http.MethodGet, "/links"
	case len(rest) == 2 && slices.Contains(adminapi.LinkActions, rest[0]):
		id, err := strconv.ParseInt(rest[1], 10, 32)
		if err != nil || id < 0 {
			return usagef("link %s: broker id %q: want an integer >= 0", rest[0], rest[1])
		}
		q := url.Values{}
		if rest[0] == "slow" {
			if *latency != 0 {
				q.Set("latency", latency.String())
			}
			if *jitter != 0 {
				q.Set("jitter", jitter.String())
			}
			if *bandwidth != 0 {
				q.Set("bandwidth", strconv.FormatInt(*bandwidth, 10))
			}
		} else if err := onlyWith(fs, "link slow", "latency", "jitter", "bandwidth"); err != nil {
			return err
		}
		if _, err := adminapi.ParseLinkFault(rest[0], keys(q), q.Get); err != nil {
			return usagef("link %s: %v", rest[0], err)
		}
		method, path = http.MethodPost, fmt.Sprintf("/links/%d/%s", id, rest[0])
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
	case len(rest) >= 1 && rest[0] != "list" && !slices.Contains(adminapi.LinkActions, rest[0]):
		return usagef("link: unknown action %q (want list or one of %s)", rest[0], strings.Join(adminapi.LinkActions, ", "))
	default:
		return usagef("link: want `list` or `ACTION ID`, got %q", rest)
	}
	return admin.call(ctx, "link", method, path, stdout)
}

func keys(q url.Values) []string {
	out := make([]string, 0, len(q))
	for k := range q {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
