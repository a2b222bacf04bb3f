package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Op names a file-system operation, for error injection: the mutating ones, and opening a
// file or directory (where a process out of descriptors gets EMFILE).
type Op string

// The operations an Injector sees.
const (
	// OpOpen is every open of a file (before OpCreate when it creates one) and the directory
	// opens of ReadDir and SyncDir.
	OpOpen     Op = "open"
	OpCreate   Op = "create"
	OpWrite    Op = "write"
	OpTruncate Op = "truncate"
	OpSync     Op = "sync"
	OpRemove   Op = "remove"
	OpRename   Op = "rename"
	OpMkdir    Op = "mkdir"
)

// Injector decides whether a mutating operation on path fails: a non-nil error is returned
// to the caller (wrapped in *os.PathError) and the operation does nothing.
type Injector func(op Op, path string) error

// MemFS is an in-memory file system that models what survives a machine crash, in the way a
// journaling Linux file system (ext4, data=ordered) behaves:
//
//   - file contents written with WriteAt/Write are volatile until the file is Synced;
//   - creations, removals, renames and truncations are journaled: they survive a crash even
//     without a directory fsync (a truncation also cuts the durable contents);
//   - CrashClone returns the file system as it would be found after a power loss: every file
//     holds exactly its durable contents.
//
// A strict MemFS (NewStrictMemFS, pebble's NewStrictMem) does not journal directory entries:
// a file or directory created, renamed or removed in a directory is durable only once that
// directory was SyncDir'ed after the change. A crash brings the namespace back to what the
// directories held at their last SyncDir, from the roots down: a file created since is gone
// (with a directory created since, everything under it), a name renamed since still names
// the old file (and the new name is gone), a file removed since is back with its durable
// contents. Truncations stay journaled. This is the conservative POSIX model, under which a
// missing directory fsync after creating a segment or renaming a checkpoint loses it.
//
// Open files keep working after their name is removed (unix semantics). Errors can be
// injected (SetInjector) and the capacity bounded (SetCapacity: ENOSPC past it). All methods
// are safe for concurrent use.
type MemFS struct {
	mu struct {
		sync.Mutex
		nodes    map[string]*memNode // cleaned path -> node; "." and "/" are the roots
		inject   Injector
		capacity int64 // bytes; <= 0 unlimited
		used     int64 // bytes of file contents (current)
	}
	now    func() time.Time
	strict bool // directory entries durable only after SyncDir (NewStrictMemFS)
}

type memNode struct {
	dir     bool
	data    []byte // current contents (the page cache)
	durable []byte // contents as of the last Sync (what a crash leaves)
	mod     time.Time
	// synced holds a directory's entries as of its last SyncDir (name -> node): what a crash
	// of a strict MemFS leaves in it. Nil for files and for a directory never synced.
	synced map[string]*memNode
}

// NewMemFS returns an empty MemFS whose clock is now (nil: time.Now), used for modification
// times.
func NewMemFS(now func() time.Time) *MemFS {
	if now == nil {
		now = time.Now
	}
	m := &MemFS{now: now}
	m.mu.nodes = map[string]*memNode{".": {dir: true}, "/": {dir: true}}
	return m
}

// NewStrictMemFS returns an empty strict MemFS (see MemFS): directory entries are durable
// only after a SyncDir of their directory. The roots ("/" and ".") exist durably.
func NewStrictMemFS(now func() time.Time) *MemFS {
	m := NewMemFS(now)
	m.strict = true
	return m
}

// SetInjector installs (nil: removes) an error injector.
func (m *MemFS) SetInjector(inj Injector) {
	m.mu.Lock()
	m.mu.inject = inj
	m.mu.Unlock()
}

// SetCapacity bounds the total file contents to n bytes (n <= 0: unbounded); a write that
// would grow past it fails with ENOSPC, as a full disk does.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	m.mu.capacity = n
	m.mu.Unlock()
}

// Used returns the bytes of file contents held now.
func (m *MemFS) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.used
}

// Clone returns a new MemFS holding a copy of m as it is now (contents and durable contents,
// and for a strict MemFS what each directory held at its last SyncDir): the disk of a process
// that stopped, for a second one to open.
func (m *MemFS) Clone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS(m.now)
	c.strict = m.strict
	copies := map[*memNode]*memNode{}
	var cp func(n *memNode) *memNode
	cp = func(n *memNode) *memNode {
		if d, ok := copies[n]; ok {
			return d
		}
		d := &memNode{dir: n.dir, data: slices.Clone(n.data), durable: slices.Clone(n.durable), mod: n.mod}
		copies[n] = d
		if n.synced != nil {
			d.synced = make(map[string]*memNode, len(n.synced))
			for name, k := range n.synced {
				d.synced[name] = cp(k)
			}
		}
		return d
	}
	for p, n := range m.mu.nodes {
		c.mu.nodes[p] = cp(n)
		c.mu.used += int64(len(n.data))
	}
	return c
}

// CrashClone returns a new MemFS holding what a power loss would leave of m: the same files
// and directories (for a strict MemFS, the entries of each directory as of its last SyncDir),
// each file with its durable contents only. m itself is unchanged; open files of m do not
// refer to the clone. The clone has no injector and no capacity bound; it is strict if m is.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS(m.now)
	c.strict = m.strict
	copies := map[*memNode]*memNode{}
	for p, n := range m.crashTreeLocked() {
		d, ok := copies[n]
		if !ok {
			d = &memNode{dir: n.dir, mod: n.mod}
			if !n.dir {
				d.data, d.durable = slices.Clone(n.durable), slices.Clone(n.durable)
			}
			copies[n] = d
			c.mu.used += int64(len(d.data))
		}
		c.mu.nodes[p] = d
	}
	c.syncAllLocked()
	return c
}

// crashTreeLocked returns the namespace a power loss leaves (path -> node, mu held): the
// current one, or for a strict MemFS the one the directories' synced entries describe, from
// the roots down (a node reached twice, through a rename synced in one directory only, is
// kept once per path; a cycle of such renames is cut).
func (m *MemFS) crashTreeLocked() map[string]*memNode {
	if !m.strict {
		return m.mu.nodes
	}
	out := map[string]*memNode{}
	onPath := map[*memNode]bool{}
	var walk func(p string, n *memNode)
	walk = func(p string, n *memNode) {
		out[p] = n
		if !n.dir || onPath[n] {
			return
		}
		onPath[n] = true
		for name, k := range n.synced {
			walk(filepath.Join(p, name), k)
		}
		onPath[n] = false
	}
	for _, root := range []string{".", "/"} {
		walk(root, m.mu.nodes[root])
	}
	return out
}

// syncAllLocked records every directory's current entries as synced (mu held): after a crash
// the namespace found is durable.
func (m *MemFS) syncAllLocked() {
	if !m.strict {
		return
	}
	for p, n := range m.mu.nodes {
		if n.dir {
			n.synced = m.entriesLocked(p)
		}
	}
}

// entriesLocked returns the current entries of directory p (name -> node; mu held).
func (m *MemFS) entriesLocked(p string) map[string]*memNode {
	out := map[string]*memNode{}
	for _, q := range m.childrenLocked(p) {
		out[filepath.Base(q)] = m.mu.nodes[q]
	}
	return out
}

func clean(name string) string { return filepath.Clean(name) }

func (m *MemFS) injectLocked(op Op, name string) error {
	if m.mu.inject == nil {
		return nil
	}
	if err := m.mu.inject(op, name); err != nil {
		return &os.PathError{Op: string(op), Path: name, Err: err}
	}
	return nil
}

func (m *MemFS) parentExistsLocked(p string) bool {
	d, ok := m.mu.nodes[filepath.Dir(p)]
	return ok && d.dir
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpOpen, name); err != nil {
		return nil, err
	}
	n, ok := m.mu.nodes[p]
	switch {
	case ok && n.dir:
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
		}
		return &memFile{fs: m, n: n, name: name}, nil
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if !m.parentExistsLocked(p) {
			return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if err := m.injectLocked(OpCreate, name); err != nil {
			return nil, err
		}
		n = &memNode{mod: m.now()}
		m.mu.nodes[p] = n
	}
	if flag&os.O_TRUNC != 0 && len(n.data) > 0 {
		if err := m.injectLocked(OpTruncate, name); err != nil {
			return nil, err
		}
		m.mu.used -= int64(len(n.data))
		n.data, n.durable = nil, nil
		n.mod = m.now()
	}
	return &memFile{fs: m, n: n, name: name, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.nodes[p]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(m.childrenLocked(p)) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	if err := m.injectLocked(OpRemove, name); err != nil {
		return err
	}
	delete(m.mu.nodes, p)
	m.mu.used -= int64(len(n.data))
	return nil
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpRemove, name); err != nil {
		return err
	}
	for q, n := range m.mu.nodes {
		if q == p || strings.HasPrefix(q, p+string(filepath.Separator)) {
			delete(m.mu.nodes, q)
			m.mu.used -= int64(len(n.data))
		}
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldpath, newpath string) error {
	o, n := clean(oldpath), clean(newpath)
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok := m.mu.nodes[o]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if !m.parentExistsLocked(n) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if err := m.injectLocked(OpRename, newpath); err != nil {
		return err
	}
	if node.dir {
		// A directory moves with everything under it, onto a name that does not exist.
		if _, ok := m.mu.nodes[n]; ok || n == o || strings.HasPrefix(n, o+string(filepath.Separator)) {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EEXIST}
		}
		if err := m.injectLocked(OpRename, newpath); err != nil {
			return err
		}
		for q, sub := range m.mu.nodes {
			if q == o || strings.HasPrefix(q, o+string(filepath.Separator)) {
				delete(m.mu.nodes, q)
				m.mu.nodes[n+q[len(o):]] = sub
			}
		}
		return nil
	}
	if old, ok := m.mu.nodes[n]; ok {
		if old.dir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
		m.mu.used -= int64(len(old.data))
	}
	delete(m.mu.nodes, o)
	m.mu.nodes[n] = node
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for q := p; ; q = filepath.Dir(q) {
		n, ok := m.mu.nodes[q]
		if ok {
			if !n.dir {
				return &os.PathError{Op: "mkdir", Path: q, Err: syscall.ENOTDIR}
			}
			break
		}
		missing = append(missing, q)
		if q == filepath.Dir(q) {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := m.injectLocked(OpMkdir, dir); err != nil {
		return err
	}
	for _, q := range missing {
		m.mu.nodes[q] = &memNode{dir: true, mod: m.now()}
	}
	return nil
}

func (m *MemFS) childrenLocked(p string) []string {
	var out []string
	for q := range m.mu.nodes {
		if q != p && filepath.Dir(q) == p {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]os.DirEntry, error) {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpOpen, dir); err != nil {
		return nil, err
	}
	n, ok := m.mu.nodes[p]
	if !ok {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	kids := m.childrenLocked(p)
	out := make([]os.DirEntry, 0, len(kids))
	for _, q := range kids {
		out = append(out, fs.FileInfoToDirEntry(m.infoLocked(q, m.mu.nodes[q])))
	}
	return out, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.nodes[p]
	if !ok {
		return nil, &os.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return m.infoLocked(p, n), nil
}

// SyncDir implements FS: in a strict MemFS it makes dir's current entries (creations,
// removals, renames in it) durable; otherwise entries are journaled (durable at once) and it
// only checks that dir exists and consults the injector.
func (m *MemFS) SyncDir(dir string) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.mu.nodes[p]
	if !ok || !n.dir {
		return &os.PathError{Op: "sync", Path: dir, Err: fs.ErrNotExist}
	}
	if err := m.injectLocked(OpOpen, dir); err != nil {
		return err
	}
	if err := m.injectLocked(OpSync, dir); err != nil {
		return err
	}
	if m.strict {
		n.synced = m.entriesLocked(p)
	}
	return nil
}

func (m *MemFS) infoLocked(p string, n *memNode) memInfo {
	mode := fs.FileMode(0o644)
	if n.dir {
		mode = fs.ModeDir | 0o755
	}
	return memInfo{name: filepath.Base(p), size: int64(len(n.data)), mode: mode, mod: n.mod}
}

type memInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }
