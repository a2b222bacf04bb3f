package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/adminapi"
	"github.com/isrbench/isrbench/internal/sched"
	"github.com/isrbench/isrbench/netfetch"
)

func init() {
	register("serve", "run an embedded Kafka-compatible cluster until interrupted", cmdServe)
}

// cmdServe starts brokers 0..N-1 on 127.0.0.1:port+i and serves until ctx
// is done (SIGINT/SIGTERM), then shuts down cleanly (a temporary data dir
// is removed).
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve --brokers 3 --port 9092 [--host H] [--data-dir DIR] [--admin HOST:PORT|off] [--pprof HOST:PORT] [--admin-token-file F] [--set key=value ...] [--generate-tls DIR] [--add-scram 'SCRAM-SHA-512=[name=U,password=P]' ...] [--sched-policy batch|other|inherit]", stderr)
	brokers := fs.Int("brokers", 3, "number of brokers (ids 0..N-1)")
	port := fs.Int("port", 9092, "port of broker 0; broker i listens on port+i (0 = ephemeral)")
	host := fs.String("host", "127.0.0.1", "host (address) the brokers listen on; 0.0.0.0 = every interface")
	dataDir := fs.String("data-dir", "", "data directory (<dir>/broker-<id>); empty = temporary, removed on exit")
	admin := fs.String("admin", "", "admin HTTP address HOST:PORT (GET /brokers, /metrics; POST /brokers/<id>/<action>); empty = loopback (--host if it is a loopback address, else 127.0.0.1) and --port+1000 (ephemeral with --port 0), off = none")
	pprofAddr := fs.String("pprof", "", "serve Go's pprof endpoints (/debug/pprof/) on HOST:PORT, e.g. 127.0.0.1:6060; empty = none")
	schedPolicy := fs.String("sched-policy", string(sched.Default), "kernel scheduling policy of every thread of the process: batch = SCHED_BATCH (a thread woken does not preempt the one running), other = SCHED_OTHER, inherit = as started (chrt, systemd's CPUSchedulingPolicy)")
	tokenFile := fs.String("admin-token-file", "", "file holding a bearer token the admin API then requires on every request (isrbench broker --admin-token-file reads the same file)")
	var sets, addScram multiFlag
	fs.Var(&sets, "set", "broker/cluster setting key=value under its Kafka name (repeatable), e.g. min.insync.replicas=2")
	generateTLS := fs.String("generate-tls", "", "write a CA, a broker certificate (for --host, localhost and 127.0.0.1) and a client certificate as PEM into DIR (kept and reused if DIR has them), and use them as ssl.keystore.location and ssl.truststore.location unless those are set")
	fs.Var(&addScram, "add-scram", "a SCRAM user set at start, as kafka-storage.sh format --add-scram: 'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(stderr, "\nsettings for --set (Kafka's name, type, default, allowed values, Kafka's update mode):\n%s", cluster.SettingsHelp())
	}
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
	policy, err := sched.Parse(*schedPolicy)
	if err != nil {
		return usagef("serve: --sched-policy: %v", err)
	}
	if strings.TrimSpace(*host) == "" {
		return usagef("serve: --host is empty; want an address such as 127.0.0.1, ::1 or 0.0.0.0 (every interface)")
	}
	cfg := cluster.DefaultConfig()
	cfg.Brokers, cfg.BasePort, cfg.Host, cfg.DataDir = *brokers, *port, *host, *dataDir
	for _, kv := range sets {
		if err := cfg.SetKV(kv); err != nil {
			return usagef("serve: --set: %v", err)
		}
	}
	if err := serveSecurity(&cfg, *generateTLS, addScram, stdout); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return usagef("serve: --set: %v", err)
	}
	if _, err := sched.Apply(policy); err != nil { // a sandbox may refuse it: serve all the same, and say so
		fmt.Fprintf(stderr, "isrbench serve: --sched-policy %s refused, the threads run as they were: %v\n", policy, err)
	}
	adminAddr, err := adminAddress(*admin, *host, *port)
	if err != nil {
		return err
	}
	var acfg adminapi.Config
	if *tokenFile != "" {
		if adminAddr == "off" {
			return usagef("serve: --admin-token-file with --admin off: there is no admin API to protect")
		}
		if acfg.Token, err = adminapi.ReadToken(*tokenFile); err != nil {
			return usagef("serve: --admin-token-file: %v", err)
		}
	}
	var adminLn net.Listener
	if adminAddr != "off" {
		if adminLn, err = net.Listen("tcp", adminAddr); err != nil {
			return fmt.Errorf("serve: admin listener on %s: %w (choose another with --admin HOST:PORT, or --admin off)", adminAddr, err)
		}
		if ta, ok := adminLn.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && acfg.Token == "" {
			fmt.Fprintf(stderr, "isrbench serve: warning: the admin API on %s is reachable from other machines without a token: anyone who reaches it can stop brokers (give --admin-token-file FILE)\n", adminLn.Addr())
		}
	}
	stopPprof, err := servePprof(*pprofAddr, stdout, stderr)
	if err != nil {
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	defer stopPprof()
	// Client connections and segment files (at most netfetch.LogFiles): take all the file
	// limit the process may have (the controller refuses the topics it cannot host).
	files, err := netfetch.RaiseFileLimit(cfg.Brokers)
	if err != nil {
		fmt.Fprintf(stderr, "isrbench serve: %v\n", err)
	}
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", cl.Bootstrap())
	printListeners(cl, stdout)
	fmt.Fprintf(stdout, "data dir: %s\n", cl.DataDir())
	fmt.Fprintf(stdout, "metadata: %s\n", cl.Recovery) // what a restart on the same data dir brought back
	fmt.Fprintf(stdout, "files: %s\n", files)          // the file limit bounds the partitions the brokers can host
	fmt.Fprintf(stdout, "threads: %s (--sched-policy %s)\n", sched.Describe(), policy)
	var adm *adminapi.Server
	served := make(chan error, 1)
	if adminLn != nil {
		adm = adminapi.New(cl, acfg)
		go func() { served <- adm.Serve(adminLn) }()
		tok := ""
		if *tokenFile != "" {
			tok = " --admin-token-file " + *tokenFile
		}
		fmt.Fprintf(stdout, "admin: http://%s (isrbench broker {%s} ID --admin %s%s; GET /metrics)\n",
			adminLn.Addr(), strings.Join(cluster.Actions, "|"), adminLn.Addr(), tok)
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

// adminAddress resolves --admin: "off", an explicit HOST:PORT (checked), or the default:
// loopback (the brokers' host if it is a loopback address) at port+1000, ephemeral with
// port 0. The admin API never follows --host onto other interfaces unless --admin says so.
func adminAddress(flag, host string, port int) (string, error) {
	switch flag {
	case "off":
		return "off", nil
	case "":
		h := "127.0.0.1"
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			h = host
		} else if host == "localhost" {
			h = host
		}
		p := 0
		if port != 0 {
			p = port + 1000
		}
		if p > 65535 {
			return "", usagef("serve: the admin port would be --port %d + 1000 = %d, outside 0..65535; give --admin HOST:PORT", port, p)
		}
		return net.JoinHostPort(h, strconv.Itoa(p)), nil
	}
	h, p, err := net.SplitHostPort(flag)
	if err != nil {
		return "", usagef("serve: --admin %q: %v; want HOST:PORT (e.g. 127.0.0.1:10092) or off", flag, err)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
		return "", usagef("serve: --admin %q: port %q is not a number in 0..65535", flag, p)
	}
	if h == "" {
		return "", usagef("serve: --admin %q: no host; want HOST:PORT, e.g. 127.0.0.1:10092 (0.0.0.0:10092 for every interface, with --admin-token-file)", flag)
	}
	return flag, nil
}
