package main

import (
	"context"
	"fmt"
	"io"

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
	cl, err := netfetch.StartCluster(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", cl.Bootstrap())
	fmt.Fprintf(stdout, "data dir: %s\n", cl.DataDir())
	<-ctx.Done()
	fmt.Fprintln(stderr, "isrbench serve: shutting down")
	return cl.Close()
}
