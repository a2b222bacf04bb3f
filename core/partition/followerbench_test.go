package partition

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// BenchmarkAppendAsFollower: one op is one replica fetch response's partition applied by a
// follower on a real log in a temporary directory: one 1 KiB record of an idempotent
// producer, then the leader's HW. The log/ line is the log's Append alone, the floor the
// follower's own work adds to.
func BenchmarkAppendAsFollower(b *testing.B) {
	tmpl := pidBatch(7, 0, 0, 1, string(make([]byte, 1024)))
	crc := crc32.MakeTable(crc32.Castagnoli)
	blob := make([]byte, len(tmpl))
	batch := func(off int64, seq int32) []byte {
		copy(blob, tmpl)
		binary.BigEndian.PutUint64(blob[0:], uint64(off))
		binary.BigEndian.PutUint32(blob[53:], uint32(seq))
		binary.BigEndian.PutUint32(blob[17:], crc32.Checksum(blob[21:], crc))
		return blob
	}
	b.Run("replica", func(b *testing.B) {
		dir := b.TempDir()
		l, _, err := log.Open(dir, log.DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		r, err := NewReplica("t", 0, 1, l, dir, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 0, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var off int64
		for b.Loop() {
			if _, err := r.AppendAsFollower(batch(off, int32(off)), off); err != nil {
				b.Fatal(err)
			}
			off++
		}
	})
	b.Run("log", func(b *testing.B) {
		l, _, err := log.Open(b.TempDir(), log.DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ReportAllocs()
		var off int64
		for b.Loop() {
			if _, err := l.Append(batch(off, int32(off)), false, 0); err != nil {
				b.Fatal(err)
			}
			off++
		}
	})
}
