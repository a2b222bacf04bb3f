package partition

import (
	"fmt"
	"sync/atomic"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// memLog is a real core/log.Log in an in-memory file system (vfs.MemFS): the tests run the
// log production runs, without touching the disk.
type memLog struct {
	*log.Log
	fs  *vfs.MemFS
	dir string
	cfg log.Config
}

var _ logStore = (*memLog)(nil)

var memLogs atomic.Int64

func newMemLog() *memLog { return newMemLogWith(log.DefaultConfig()) }

func newMemLogWith(cfg log.Config) *memLog {
	fs := vfs.NewMemFS(nil)
	dir := fmt.Sprintf("/mem/log-%d", memLogs.Add(1))
	return openMemLog(fs, dir, cfg)
}

func openMemLog(fs *vfs.MemFS, dir string, cfg log.Config) *memLog {
	cfg.FS = fs
	l, _, err := log.Open(dir, cfg)
	if err != nil {
		panic("BUG: opening an in-memory log: " + err.Error())
	}
	return &memLog{Log: l, fs: fs, dir: dir, cfg: cfg}
}

// reopen opens a copy of the log's file system as it is now (what a restarted process finds
// in the page cache); the original stays usable.
func (m *memLog) reopen() *memLog { return openMemLog(m.fs.Clone(), m.dir, m.cfg) }
