package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/cluster/adminapi"
)

// adminFlags are the flags of the commands that talk to the admin API of isrbench serve
// (broker, link); resolve checks them and fills base and token.
type adminFlags struct {
	admin, tokenFile *string
	base, token      string
}

func addAdminFlags(fs *flag.FlagSet) *adminFlags {
	return &adminFlags{
		admin:     fs.String("admin", "127.0.0.1:10092", "admin address printed by isrbench serve (its --port + 1000): HOST:PORT or http://HOST:PORT"),
		tokenFile: fs.String("admin-token-file", "", "the token file given to isrbench serve --admin-token-file"),
	}
}

// resolve checks --admin and reads --admin-token-file; cmd names the command in errors.
func (a *adminFlags) resolve(cmd string) error {
	base, err := adminBase(*a.admin)
	if err != nil {
		return err
	}
	a.base = base
	if *a.tokenFile != "" {
		if a.token, err = adminapi.ReadToken(*a.tokenFile); err != nil {
			return usagef("%s: --admin-token-file: %v", cmd, err)
		}
	}
	return nil
}

// call sends method path to the admin API and copies its answer (JSON) to stdout; an answer
// other than 200 OK is an error with the status and the answer's text.
func (a *adminFlags) call(ctx context.Context, cmd, method, path string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return usagef("%s: --admin %q: %v", cmd, *a.admin, err)
	}
	req.Header.Set(adminapi.Header, "1")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: admin API of isrbench serve at %s: %w", cmd, *a.admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer of %s: %w", cmd, *a.admin, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s: %s: %s", cmd, method, path, resp.Status, strings.TrimSpace(string(body)))
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
