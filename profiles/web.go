package profiles

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/driver"
)

// WebTo serves pprof's web UI for one profile, or for new against base when
// two files are given (base first; as pprof -diff_base), on addr (host:port;
// port 0 picks a free one). The flame graph is at <url>/ui/flamegraph. No
// browser is opened: the URL is printed to out. WebTo blocks until ctx is
// done, then shuts the server down and returns nil; ready, if not nil, is called with the
// server's base URL once it accepts connections.
func WebTo(ctx context.Context, out io.Writer, addr string, ready func(url string), files ...string) error {
	if len(files) != 1 && len(files) != 2 {
		return fmt.Errorf("profiles: web takes one profile or base and new, got %d files", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil { // clear error before pprof's own
			return err
		}
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("profiles: bad --http address %q: %w", addr, err)
	}
	args := []string{"-http=" + addr, "-no_browser", "-symbolize=none"}
	if len(files) == 2 {
		args = append(args, "-diff_base="+files[0], files[1])
	} else {
		args = append(args, files[0])
	}
	ui := &webUI{out: out}
	err := driver.PProf(&driver.Options{
		Flagset: newPprofFlags(args),
		UI:      ui,
		HTTPServer: func(a *driver.HTTPServerArgs) error {
			return serveUntilDone(ctx, a, out, ready)
		},
	})
	if err != nil {
		return fmt.Errorf("profiles: pprof web: %w%s", err, ui.errText())
	}
	return nil
}

// serveUntilDone is the pprof HTTPServer: it serves the UI under /ui/ like
// pprof's default server and returns when ctx is done.
func serveUntilDone(ctx context.Context, a *driver.HTTPServerArgs, out io.Writer, ready func(string)) error {
	ln, err := net.Listen("tcp", a.Hostport)
	if err != nil {
		return err
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := a.Handlers[req.URL.Path]
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", handler))
	mux.Handle("/", http.RedirectHandler("/ui/", http.StatusTemporaryRedirect))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "Serving pprof web UI on %s/ui/ (flame graph: %s/ui/flamegraph)\n", url, url)
	if ready != nil {
		ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// webUI is pprof's driver.UI: non-interactive, never opens a browser.
type webUI struct {
	out io.Writer
	mu  sync.Mutex
	err strings.Builder
}

func (u *webUI) ReadLine(string) (string, error) { return "", io.EOF }
func (u *webUI) Print(args ...any) {
	msg := fmt.Sprint(args...)
	if strings.HasPrefix(msg, "Serving web UI on ") {
		return // we print the real URL (the flag may say port 0)
	}
	fmt.Fprintln(u.out, strings.TrimSuffix(msg, "\n"))
}
func (u *webUI) PrintErr(args ...any) {
	msg := strings.TrimSuffix(fmt.Sprint(args...), "\n")
	u.mu.Lock()
	fmt.Fprintf(&u.err, "\n%s", msg)
	u.mu.Unlock()
	fmt.Fprintln(u.out, msg)
}
func (u *webUI) IsTerminal() bool                    { return false }
func (u *webUI) WantBrowser() bool                   { return false }
func (u *webUI) SetAutoComplete(func(string) string) {}
func (u *webUI) errText() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err.String()
}

// pprofFlags is driver.FlagSet over a fixed argument list.
type pprofFlags struct {
	fs    *flag.FlagSet
	args  []string
	extra []string
}

func newPprofFlags(args []string) *pprofFlags {
	fs := flag.NewFlagSet("pprof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &pprofFlags{fs: fs, args: args}
}

func (p *pprofFlags) Bool(name string, def bool, usage string) *bool {
	return p.fs.Bool(name, def, usage)
}
func (p *pprofFlags) Int(name string, def int, usage string) *int { return p.fs.Int(name, def, usage) }
func (p *pprofFlags) Float64(name string, def float64, usage string) *float64 {
	return p.fs.Float64(name, def, usage)
}
func (p *pprofFlags) String(name string, def string, usage string) *string {
	return p.fs.String(name, def, usage)
}
func (p *pprofFlags) StringList(name string, def string, usage string) *[]*string {
	l := &stringList{}
	if def != "" {
		l.vals = []*string{&def}
	}
	p.fs.Var(l, name, usage)
	return &l.vals
}
func (p *pprofFlags) ExtraUsage() string      { return strings.Join(p.extra, "\n") }
func (p *pprofFlags) AddExtraUsage(eu string) { p.extra = append(p.extra, eu) }
func (p *pprofFlags) Parse(usage func()) []string {
	if err := p.fs.Parse(p.args); err != nil || p.fs.NArg() == 0 {
		usage()
		return nil
	}
	return p.fs.Args()
}

type stringList struct{ vals []*string }

func (l *stringList) String() string { return "" }
func (l *stringList) Set(s string) error {
	l.vals = append(l.vals, &s)
	return nil
}
