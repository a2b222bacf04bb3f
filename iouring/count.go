package iouring

import "sync/atomic"

// Process-wide counters for the harness's cost accounting: one atomic add per io_uring_enter(2)
// and per write Op, no allocation.
var (
	enterCalls atomic.Int64 // io_uring_enter(2) calls of every ring
	writeBytes atomic.Int64 // bytes of the write Ops handed to Submit
)

// EnterCalls returns the io_uring_enter(2) calls made by every Ring of this process so far
// (setup and teardown excluded). Safe for concurrent use.
func EnterCalls() int64 { return enterCalls.Load() }

// WriteBytes returns the bytes of the write Ops handed to Submit by every Ring of this process
// so far (copied by the kernel from user space into the page cache). Safe for concurrent use.
func WriteBytes() int64 { return writeBytes.Load() }
