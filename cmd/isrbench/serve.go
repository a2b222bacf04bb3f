package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/netfetch"
)

func init() {
	register("serve", "run an embedded Kafka-compatible cluster until interrupted", cmdServe)
}

// cmdServe starts brokers 0..N-1 on 127.0.0.1:port+i and serves until ctx
// is done (SIGINT/SIGTERM), then shuts down cleanly (a temporary data dir
// is removed).
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve --brokers 3 --port 9092 [--data-dir DIR] [--set key=value ...]", stderr)
	brokers := fs.Int("brokers", 3, "number of brokers (ids 0..N-1)")
	port := fs.Int("port", 9092, "port of broker 0; broker i listens on port+i (0 = ephemeral)")
	host := fs.String("host", "127.0.0.1", "listener host")
	dataDir := fs.String("data-dir", "", "data directory (<dir>/broker-<id>); empty = temporary, removed on exit")
	admin := fs.String("admin", "", "admin HTTP address (GET /brokers, /metrics; POST /brokers/<id>/<action>); empty = --host and --port+1000 (ephemeral with --port 0), off = none")
	var sets multiFlag
	fs.Var(&sets, "set", "broker/cluster setting key=value under its Kafka name (repeatable), e.g. min.insync.replicas=2")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected arguments %q", fs.Args())
	}
	if *brokers < 1 {
		return usagef("serve: --brokers %d: must be >= 1", *brokers)
	}
	if *port < 0 || *port+*brokers-1 > 65535 {
		return usagef("serve: --port %d with %d brokers is outside 0..65535", *port, *brokers)
	}
	cfg := netfetch.DefaultClusterConfig()
	cfg.Brokers, cfg.BasePort, cfg.Host, cfg.DataDir = *brokers, *port, *host, *dataDir
	for _, kv := range sets {
		if err := cfg.SetKV(kv); err != nil {
			return usagef("serve: --set: %v", err)
		}
	}
	adminAddr := *admin
	if adminAddr == "" {
		p := 0
		if *port != 0 {
			p = *port + 1000
		}
		adminAddr = net.JoinHostPort(*host, strconv.Itoa(p))
	}
	var adminLn net.Listener
	if adminAddr != "off" {
		var err error
		if adminLn, err = net.Listen("tcp", adminAddr); err != nil {
			return fmt.Errorf("serve: admin listener on %s: %w (choose another with --admin HOST:PORT, or --admin off)", adminAddr, err)
		}
	}
	cl, err := netfetch.StartCluster(ctx, cfg)
	if err != nil {
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", cl.Bootstrap())
	fmt.Fprintf(stdout, "data dir: %s\n", cl.DataDir())
	fmt.Fprintf(stdout, "metadata: %s\n", cl.Recovery) // what a restart on the same data dir brought back
	var adm *netfetch.Admin
	served := make(chan error, 1)
	if adminLn != nil {
		adm = netfetch.NewAdmin(cl)
		go func() { served <- adm.Serve(adminLn) }()
		fmt.Fprintf(stdout, "admin: http://%s (isrbench broker {%s} ID --admin %s; GET /metrics)\n",
			adminLn.Addr(), strings.Join(netfetch.AdminActions, "|"), adminLn.Addr())
	}
	<-ctx.Done()
	fmt.Fprintln(stderr, "isrbench serve: shutting down")
	var errs []error
	if adm != nil {
		errs = append(errs, adm.Close(), <-served)
	}
	errs = append(errs, cl.Close())
	return errors.Join(errs...)
}
