package netfetch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/internal/kafkatest"
)

// failingListener fails its first n Accept calls with err, then accepts from the real listener.
type failingListener struct {
	net.Listener
	n   atomic.Int32
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// TestServeSurvivesTransientAcceptErrors: running out of file descriptors (EMFILE) is logged
// and retried; the server then accepts and answers. Any other accept error ends Serve with it.
func TestServeSurvivesTransientAcceptErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"EMFILE", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{"ECONNABORTED", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{"EBADF", &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EBADF)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &failingListener{Listener: real, err: tc.err}
			ln.n.Store(3)
			var mu sync.Mutex
			var logged []string
			srv := NewServer(ServerConfig{BrokerID: 7, Logf: func(f string, a ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(f, a...))
				mu.Unlock()
			}}, ln)
			served := make(chan error, 1)
			go func() { served <- srv.Serve() }()
			if !tc.transient {
				err := <-served
				srv.Close()
				if !errors.Is(err, syscall.EBADF) || !strings.Contains(err.Error(), "broker 7: accept") {
					t.Fatalf("Serve returned %v, want the EBADF accept error", err)
				}
				return
			}
			defer func() {
				srv.Close()
				if err := <-served; err != nil {
					t.Errorf("Serve after Close: %v", err)
				}
			}()
			rc := kafkatest.Dial(t, real.Addr().String())
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			resp := kmsg.NewPtrApiVersionsResponse()
			rc.RoundTrip(req, resp)
			if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
				t.Fatalf("ApiVersions after accept errors: %+v", resp)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(logged) != 3 || !strings.Contains(logged[0], tc.err.Error()) || !strings.Contains(logged[2], "retrying in 20ms") {
				t.Errorf("logged %q, want the 3 accept errors with a doubling backoff", logged)
			}
		})
	}
}

// TestPeerGone: a connection closed because the peer or the server went away is not logged;
// every other reason is.
func TestPeerGone(t *testing.T) {
	for _, tc := range []struct {
		err  error
		gone bool
	}{
		{fmt.Errorf("writing fetch response: %w", &net.OpError{Op: "write", Err: os.NewSyscallError("sendfile", syscall.EPIPE)}), true},
		{fmt.Errorf("writing Produce response: %w", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.ECONNRESET)}), true},
		{net.ErrClosed, true},
		{fmt.Errorf("reading t-0 records for fetch: %w", os.ErrNotExist), false},
		{fmt.Errorf("BUG: Fetch response v13 not supported by the encoder"), false},
		{closef("malformed request: %v", net.ErrClosed), false},
	} {
		if got := peerGone(tc.err); got != tc.gone {
			t.Errorf("peerGone(%v) = %v, want %v", tc.err, got, tc.gone)
		}
	}
}
