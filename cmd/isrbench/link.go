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
	"time"

	"github.com/isrbench/isrbench/netfetch"
)

func init() {
	register("link", "slow down, cut or heal one broker's replica links in `isrbench serve`; list faulty links", cmdLink)
}

// cmdLink talks to the admin API of `isrbench serve`: `link list` prints the faulty replica
// links, `link slow ID --latency D [--jitter D] [--bandwidth N]`, `link down ID` and `link
// heal ID` change every replica link between broker ID and the others (both directions).
func cmdLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("link", "link list | link slow ID --latency D [--jitter D] [--bandwidth BYTES/S] | link {down|heal} ID [--admin HOST:PORT]", stderr)
	admin := fs.String("admin", "127.0.0.1:10092", "admin address printed by isrbench serve (its --port + 1000): HOST:PORT or http://HOST:PORT")
	tokenFile := fs.String("admin-token-file", "", "the token file given to isrbench serve --admin-token-file")
	latency := fs.Duration("latency", 0, "slow: added per request direction (the round trip grows by twice it)")
	jitter := fs.Duration("jitter", 0, "slow: up to this much more latency, uniformly random")
	bandwidth := fs.Int64("bandwidth", 0, "slow: bytes/s per connection and direction (0 = unlimited)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	base, err := adminBase(*admin)
	if err != nil {
		return err
	}
	token := ""
	if *tokenFile != "" {
		if token, err = netfetch.ReadAdminToken(*tokenFile); err != nil {
			return usagef("link: --admin-token-file: %v", err)
		}
	}
	var method, path string
	switch {
	case len(rest) == 1 && rest[0] == "list":
		method, path = http.MethodGet, "/links"
	case len(rest) == 2 && slices.Contains(netfetch.LinkActions, rest[0]):
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
		if _, err := netfetch.ParseLinkFault(rest[0], keys(q), q.Get); err != nil {
			return usagef("link %s: %v", rest[0], err)
		}
		method, path = http.MethodPost, fmt.Sprintf("/links/%d/%s", id, rest[0])
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
	case len(rest) >= 1 && rest[0] != "list" && !slices.Contains(netfetch.LinkActions, rest[0]):
		return usagef("link: unknown action %q (want list or one of %s)", rest[0], strings.Join(netfetch.LinkActions, ", "))
	default:
		return usagef("link: want `list` or `ACTION ID`, got %q", rest)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return usagef("link: --admin %q: %v", *admin, err)
	}
	req.Header.Set(netfetch.AdminHeader, "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("link: admin API of isrbench serve at %s: %w", *admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("link: reading the answer of %s: %w", *admin, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("link: %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = stdout.Write(body)
	return err
}

func keys(q url.Values) []string {
	out := make([]string, 0, len(q))
	for k := range q {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
