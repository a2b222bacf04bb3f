package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/netfetch"
)

func init() {
	register("broker", "stop, kill, crash, pause, resume or start one broker of `isrbench serve`; list them", cmdBroker)
}

// cmdBroker talks to the admin API of `isrbench serve`: `broker list` prints every broker's
// state, `broker ACTION ID` applies an action and prints the broker's new state.
func cmdBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("broker", "broker list | broker {"+strings.Join(netfetch.AdminActions, "|")+"} ID [--admin HOST:PORT]", stderr)
	admin := fs.String("admin", "127.0.0.1:10092", "admin address printed by isrbench serve (its --port + 1000): HOST:PORT or http://HOST:PORT")
	tokenFile := fs.String("admin-token-file", "", "the token file given to isrbench serve --admin-token-file")
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
			return usagef("broker: --admin-token-file: %v", err)
		}
	}
	var method, path string
	switch {
	case len(rest) == 1 && rest[0] == "list":
		method, path = http.MethodGet, "/brokers"
	case len(rest) == 2 && slices.Contains(netfetch.AdminActions, rest[0]):
		id, err := strconv.ParseInt(rest[1], 10, 32)
		if err != nil || id < 0 {
			return usagef("broker %s: broker id %q: want an integer >= 0", rest[0], rest[1])
		}
		method, path = http.MethodPost, fmt.Sprintf("/brokers/%d/%s", id, rest[0])
	case len(rest) >= 1 && rest[0] != "list" && !slices.Contains(netfetch.AdminActions, rest[0]):
		return usagef("broker: unknown action %q (want list or one of %s)", rest[0], strings.Join(netfetch.AdminActions, ", "))
	default:
		return usagef("broker: want `list` or `ACTION ID`, got %q", rest)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return usagef("broker: --admin %q: %v", *admin, err)
	}
	req.Header.Set(netfetch.AdminHeader, "1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("broker: admin API of isrbench serve at %s: %w", *admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("broker: reading the answer of %s: %w", *admin, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("broker: %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = stdout.Write(body)
	return err
}

// adminBase checks --admin (HOST:PORT or http://HOST:PORT[/]) and returns the base URL.
func adminBase(admin string) (string, error) {
	hp := admin
	if scheme, rest, ok := strings.Cut(admin, "://"); ok {
		if scheme != "http" {
			return "", usagef("broker: --admin %q: scheme %q; want HOST:PORT or http://HOST:PORT", admin, scheme)
		}
		hp = strings.TrimSuffix(rest, "/")
	}
	h, p, err := net.SplitHostPort(hp)
	if err != nil || h == "" {
		return "", usagef("broker: --admin %q: want HOST:PORT or http://HOST:PORT, as isrbench serve prints it", admin)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return "", usagef("broker: --admin %q: port %q is not a number in 1..65535", admin, p)
	}
	return "http://" + hp, nil
}
