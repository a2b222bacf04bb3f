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
// kept.
func (b *Broker) WriteHWCheckpoint() error { return b.writeHWCheckpoint(false) }

// writeHWCheckpoint is WriteHWCheckpoint; force writes it even unchanged (a clean stop's
// last write, which must report a data directory that is gone).
func (b *Broker) writeHWCheckpoint(force bool) error {
	if err := b.LogDirOffline(); err != nil {
		return err
	}
	b.ckpt.Lock()
	defer b.ckpt.Unlock()
	hws := make(map[tp]int64, len(b.ckpt.hws))
	for k, v := range b.ckpt.hws {
		hws[k] = v
	}
	for _, h := range b.allReplicas() {
		hws[h.key] = h.r.HW()
	}
	if !force && b.ckpt.written != nil && maps.Equal(hws, b.ckpt.written) {
		return nil // the file on disk (written and synced) holds exactly these: an idle broker rewrites nothing
	}
	path := filepath.Join(b.cfg.DataDir, HWCheckpointFile)
	if err := log.WriteCheckpoint(b.fs, path, hwCheckpointVersion, encodeHWCheckpoint(hws)); err != nil {
		return b.storageFailed(log.IOError("write HW checkpoint "+path, err))
	}
	b.ckpt.missing = false
	b.ckpt.written = hws
	return nil
}
