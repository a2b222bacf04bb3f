package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's pprof endpoints (/debug/pprof/: profile?seconds=N, heap, goroutine,
// ...) on addr (HOST:PORT) until the returned function is called; "" serves nothing. A
// non-loopback address gets a warning: profiles show the process's internals to anyone who
// reaches them.
func servePprof(addr string, stdout, stderr io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, usagef("serve: --pprof %q: %v; want HOST:PORT, e.g. 127.0.0.1:6060", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --pprof listener on %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		fmt.Fprintf(stderr, "isrbench serve: warning: --pprof on %s is reachable from other machines\n", ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	fmt.Fprintf(stdout, "pprof: http://%s/debug/pprof/ (go tool pprof http://%s/debug/pprof/profile?seconds=30)\n", ln.Addr(), ln.Addr())
	return func() { srv.Close() }, nil
}
