package broker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// The HW checkpoint is Kafka's replication-offset-checkpoint:
//
//	0                 <- version
//	2                 <- number of entries
//	topic 0 1234      <- "topic partition hw" (hw exclusive)
//	topic 1 99
//
// written atomically by log.WriteCheckpoint (temp file, fsync, rename, fsync dir).

const hwCheckpointVersion = 0

// encodeHWCheckpoint returns the entry lines for hws, sorted by topic, partition.
func encodeHWCheckpoint(hws map[tp]int64) []string {
	lines := make([]string, 0, len(hws))
	for k, hw := range hws {
		lines = append(lines, k.topic+" "+strconv.Itoa(int(k.partition))+" "+strconv.FormatInt(hw, 10))
	}
	slices.Sort(lines) // deterministic file contents
	return lines
}

// decodeHWCheckpoint parses entry lines; errors name the line.
func decodeHWCheckpoint(path string, version int, lines []string) (map[tp]int64, error) {
	if version != hwCheckpointVersion {
		return nil, fmt.Errorf("%s: unsupported checkpoint version %d (want %d)", path, version, hwCheckpointVersion)
	}
	out := make(map[tp]int64, len(lines))
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: entry %d %q: want \"topic partition offset\"", path, i+1, line)
		}
		p, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%s: entry %d %q: bad partition %q", path, i+1, line, f[1])
		}
		off, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || off < 0 {
			return nil, fmt.Errorf("%s: entry %d %q: bad offset %q", path, i+1, line, f[2])
		}
		out[tp{f[0], int32(p)}] = off
	}
	return out, nil
}

// readHWCheckpoint reads the HW checkpoint; missing reports that there is no file.
func readHWCheckpoint(fs vfs.FS, path string) (hws map[tp]int64, missing bool, err error) {
	if _, err := fs.Stat(path); errors.Is(err, os.ErrNotExist) {
		return map[tp]int64{}, true, nil
	}
	version, lines, err := log.ReadCheckpoint(fs, path)
	if err != nil {
		return map[tp]int64{}, false, fmt.Errorf("read HW checkpoint: %w", err)
	}
	if lines == nil && version == 0 {
		return map[tp]int64{}, false, nil
	}
	hws, err = decodeHWCheckpoint(path, version, lines)
	if err != nil {
		return map[tp]int64{}, false, err
	}
	return hws, false, nil
}

// WriteHWCheckpoint writes every hosted replica's HW to
// <DataDir>/replication-offset-checkpoint (periodically), unless it would rewrite what this
// incarnation last wrote unchanged. Entries read at startup for replicas not opened yet are
// kept. With Config.HousekeepingChangedOnly it reads the HW of only the replicas whose HW
// signal fired since the previous call (changes.go): an idle broker reads none.
func (b *Broker) WriteHWCheckpoint() error { return b.writeHWCheckpoint(false) }

// writeHWCheckpoint is WriteHWCheckpoint; force writes it even unchanged (a clean stop's
// last write, which must report a data directory that is gone).
func (b *Broker) writeHWCheckpoint(force bool) error {
	if err := b.LogDirOffline(); err != nil {
		return err
	}
	b.ckpt.Lock()
	defer b.ckpt.Unlock()
	var hws map[tp]int64
	if b.cfg.HousekeepingChangedOnly {
		hws = b.changedHWsLocked()
		if !force && b.ckpt.written != nil && !b.ckpt.stale {
			return nil
		}
	} else {
		hws = b.allHWsLocked()
		if !force && b.ckpt.written != nil && maps.Equal(hws, b.ckpt.written) {
			return nil // the file on disk (written and synced) holds exactly these: an idle broker rewrites nothing
		}
	}
	path := filepath.Join(b.cfg.DataDir, HWCheckpointFile)
	if err := log.WriteCheckpoint(b.fs, path, hwCheckpointVersion, encodeHWCheckpoint(hws)); err != nil {
		return b.storageFailed(log.IOError("write HW checkpoint "+path, err))
	}
	b.ckpt.missing = false
	b.ckpt.written = hws
	b.ckpt.stale = false
	return nil
}

// allHWsLocked returns the checkpoint's entries read from every hosted replica: the startup
// entries overlaid with each replica's HW (b.ckpt held).
func (b *Broker) allHWsLocked() map[tp]int64 {
	hws := make(map[tp]int64, len(b.ckpt.hws))
	for k, v := range b.ckpt.hws {
		hws[k] = v
	}
	for _, h := range b.allReplicas() {
		hws[h.key] = h.r.HW()
	}
	return hws
}

// changedHWsLocked brings b.ckpt.cur up to date and returns it: the HWs of the replicas
// b.ckptSet marked since the last call, or of every replica when it must be rebuilt (first
// use, a replica or a startup entry gone). It sets b.ckpt.stale when cur changed. The map
// returned becomes b.ckpt.written when written: cur is copied on its next change. b.ckpt held.
func (b *Broker) changedHWsLocked() map[tp]int64 {
	marked := b.ckptSet.take(nil) // before any read: a change after it marks again
	if b.ckpt.cur == nil || b.ckpt.rebuild || len(b.ckpt.hws) != b.ckpt.hwsLen {
		hws := b.allHWsLocked()
		if !maps.Equal(hws, b.ckpt.written) {
			b.ckpt.stale = true
		}
		b.ckpt.cur, b.ckpt.rebuild, b.ckpt.hwsLen = hws, false, len(b.ckpt.hws)
		return hws
	}
	for _, h := range marked {
		if b.lookup(h.key.topic, h.key.partition) != h {
			continue // not hosted any more (its removal asked for a rebuild)
		}
		hw := h.r.HW()
		if old, ok := b.ckpt.cur[h.key]; ok && old == hw {
			continue
		}
		if !b.ckpt.stale && b.ckpt.written != nil {
			b.ckpt.cur = maps.Clone(b.ckpt.cur) // written stays what the file holds
		}
		b.ckpt.cur[h.key] = hw
		b.ckpt.stale = true
	}
	return b.ckpt.cur
}
