package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Disk bounds of a run (see the package doc, "Disk"). The harness's defaults differ from
// Kafka's (log.retention.bytes -1, log.segment.bytes 1 GiB, check every 5 min) so that a run
// of any duration stays within a few GB: a partition replica's log holds at most about
// log.retention.bytes + log.segment.bytes (retention never deletes the active segment) plus
// what it takes in during one log.retention.check.interval.ms. With 6 partitions, RF 3 and
// 250 MB/s that is 18 x (256 + 64 + ~42) MiB, about 6.5 GiB at worst.
const (
	// DefaultLogRetentionBytes is the harness's log.retention.bytes: 256 MiB per partition replica.
	DefaultLogRetentionBytes = 256 << 20
	// DefaultLogSegmentBytes is the harness's log.segment.bytes: 64 MiB.
	DefaultLogSegmentBytes = 64 << 20
)

// DefaultMinFreeDisk is the default isrbench.min.free.disk: 2 GiB.
var DefaultMinFreeDisk = DiskFloor{Bytes: 2 << 30}

// DiskFloor is isrbench.min.free.disk: the least free space the data dir's filesystem may
// have during a run, either absolute (Bytes) or a share of the filesystem (Percent, 0..100).
// The zero value disables the guard. A DiskFloor is a plain value.
type DiskFloor struct {
	Bytes   int64
	Percent float64
}

// Of returns the floor in bytes for a filesystem of total bytes.
func (f DiskFloor) Of(total uint64) int64 {
	if f.Percent > 0 {
		return int64(math.Ceil(float64(total) * f.Percent / 100))
	}
	return f.Bytes
}

// Off reports whether the guard is disabled.
func (f DiskFloor) Off() bool { return f.Bytes <= 0 && f.Percent <= 0 }

// String is the canonical text form that ParseDiskFloor reads back ("2GiB", "5%", "0").
func (f DiskFloor) String() string {
	switch {
	case f.Percent > 0:
		return strconv.FormatFloat(f.Percent, 'g', -1, 64) + "%"
	case f.Bytes <= 0:
		return "0"
	}
	for _, u := range []struct {
		s string
		n int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}} {
		if f.Bytes%u.n == 0 {
			return strconv.FormatInt(f.Bytes/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(f.Bytes, 10)
}

var diskUnits = []struct {
	s string
	n float64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// ParseDiskFloor reads a floor: a byte count ("2147483648"), a size with a unit (B, KB, MB,
// GB, TB, KiB, MiB, GiB, TiB: "2GiB", "500MiB") or a percentage of the filesystem ("5%",
// 0 < p < 100). "0" disables the guard. Errors name key and the allowed forms.
func ParseDiskFloor(key, v string) (DiskFloor, error) {
	t := strings.TrimSpace(v)
	bad := func(why string) (DiskFloor, error) {
		return DiskFloor{}, fmt.Errorf("%s: %q %s; allowed bytes (2147483648), a size (2GiB, 500MiB, 10GB) or a percentage of the filesystem (5%%), 0 = off", key, v, why)
	}
	if p, ok := strings.CutSuffix(t, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) {
			return bad("is not a percentage")
		}
		if f <= 0 || f >= 100 {
			return bad("is out of range (0 < percent < 100)")
		}
		return DiskFloor{Percent: f}, nil
	}
	mult := 1.0
	for _, u := range diskUnits {
		if n, ok := strings.CutSuffix(t, u.s); ok {
			t, mult = strings.TrimSpace(n), u.n
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return bad("is not a size")
	}
	b := f * mult
	if b < 0 || b > float64(math.MaxInt64/2) {
		return bad("is out of range")
	}
	return DiskFloor{Bytes: int64(b)}, nil
}
