package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// WriteCheckpoint atomically replaces the checkpoint file at path with Kafka's checkpoint text
// format:
//
//	<version>\n
//	<number of lines>\n
//	<line>\n ...
//
// It writes path+".tmp", fsyncs it, renames it over path and fsyncs the directory, so a crash
// leaves either the old or the new file, never a mix. A stale .tmp from an earlier crash is
// overwritten. Lines must not contain a newline. Safe for concurrent use on different paths;
// callers serialise writes to one path.
func WriteCheckpoint(fs vfs.FS, path string, version int, lines []string) error {
	return writeCheckpoint(fs, path, version, lines, true)
}

// WriteCheckpointNoSync is WriteCheckpoint without fsync (vfs.WriteFileReplace): readers see
// the old or the new file whole, but a crash may leave the old file, or an empty or short
// one. Only for checkpoints whose readers repair them from the log (the leader-epoch
// checkpoint).
func WriteCheckpointNoSync(fs vfs.FS, path string, version int, lines []string) error {
	return writeCheckpoint(fs, path, version, lines, false)
}

func writeCheckpoint(fs vfs.FS, path string, version int, lines []string, durable bool) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n%d\n", version, len(lines))
	for i, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			return fmt.Errorf("log: checkpoint %s line %d contains a newline", path, i)
		}
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	write := vfs.WriteFileAtomic
	if !durable {
		write = vfs.WriteFileReplace
	}
	if err := write(vfs.Or(fs), path, buf.Bytes()); err != nil {
		return fmt.Errorf("log: checkpoint %s: %w", path, err)
	}
	return nil
}

// ReadCheckpoint reads a file written by WriteCheckpoint. A missing file returns
// (0, nil, nil): callers treat it as "no checkpoint yet". A malformed file (bad version or
// count line, fewer or more lines than the count says) is an error naming the problem.
// A leftover path+".tmp" is ignored.
func ReadCheckpoint(fs vfs.FS, path string) (version int, lines []string, err error) {
	data, err := vfs.ReadFile(vfs.Or(fs), path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("log: checkpoint %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	next := func(what string) (string, error) {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return "", fmt.Errorf("log: checkpoint %s: %s: %w", path, what, err)
			}
			return "", fmt.Errorf("log: checkpoint %s: missing %s", path, what)
		}
		return sc.Text(), nil
	}
	vs, err := next("version line")
	if err != nil {
		return 0, nil, err
	}
	version, err = strconv.Atoi(strings.TrimSpace(vs))
	if err != nil {
		return 0, nil, fmt.Errorf("log: checkpoint %s: version line %q is not an integer", path, vs)
	}
	cs, err := next("count line")
	if err != nil {
		return 0, nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(cs))
	if err != nil || n < 0 {
		return 0, nil, fmt.Errorf("log: checkpoint %s: count line %q is not a non-negative integer", path, cs)
	}
	lines = make([]string, 0, min(n, 1<<16))
	for i := 0; i < n; i++ {
		l, err := next(fmt.Sprintf("line %d of %d", i+1, n))
		if err != nil {
			return 0, nil, err
		}
		lines = append(lines, l)
	}
	if sc.Scan() {
		return 0, nil, fmt.Errorf("log: checkpoint %s: more lines than the count %d", path, n)
	}
	return version, lines, nil
}
