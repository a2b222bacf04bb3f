package iouring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI constants (include/uapi/linux/io_uring.h). x/sys/unix has the
// syscall numbers but not the structures, so they are spelled out here.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0

	enterGetEvents = 1 << 0

	opNop    = 0
	opWritev = 2
	opFsync  = 3

	// iovMax is the kernel's UIO_MAXIOV: one WRITEV SQE carries at most this many iovecs.
	iovMax = 1024

	sqeSize = 64
	cqeSize = 16
)

// sqringOffsets is struct io_sqring_offsets (40 bytes).
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets (40 bytes).
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params (120 bytes).
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes), with the unions reduced to the
// members this package uses.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64 // address of the iovec array in Go memory (kept reachable by the request)
	len         uint32 // number of iovecs
	rwFlags     uint32 // rw_flags / fsync_flags
	userData    uint64 // slot index; never a Go pointer
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad2        uint64
}

// cqe is struct io_uring_cqe (16 bytes; no IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

var _ [0]struct{} = [unsafe.Sizeof(params{}) - 120]struct{}{}
var _ [0]struct{} = [unsafe.Sizeof(sqe{}) - sqeSize]struct{}{}
var _ [0]struct{} = [unsafe.Sizeof(cqe{}) - cqeSize]struct{}{}

// ring is one io_uring instance: the fd and the three shared mappings.
// It is not safe for concurrent use; only its Ring touches it.
type ring struct {
	fd      int
	p       params
	sqMem   []byte // SQ ring (and CQ ring when featSingleMmap)
	cqMem   []byte // CQ ring; aliases sqMem when featSingleMmap
	sqeMem  []byte // SQE array
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe

	sqLocalTail uint32 // next SQE slot to fill (published to *sqTail on flush)
}

// setup creates a ring with at least entries SQ entries (rounded up to a
// power of two by the kernel).
func setup(entries uint32) (*ring, error) {
	r := &ring{}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&r.p)), 0)
	if errno != 0 {
		return nil, &SetupError{Errno: errno, Reason: explainSetupErrno(errno)}
	}
	r.fd = int(fd)
	if err := r.mmap(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mmap() error {
	p := &r.p
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	single := p.features&featSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("iouring: mmap SQ ring (%d bytes): %w", sqSize, err)
	}
	if single {
		r.cqMem = r.sqMem
	} else {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("iouring: mmap CQ ring (%d bytes): %w", cqSize, err)
		}
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("iouring: mmap SQEs (%d entries): %w", p.sqEntries, err)
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	r.sqLocalTail = atomic.LoadUint32(r.sqTail)
	return nil
}

// sqFree is the number of SQE slots that can be filled now.
func (r *ring) sqFree() uint32 {
	return r.p.sqEntries - (r.sqLocalTail - atomic.LoadUint32(r.sqHead))
}

// nextSQE returns the next free SQE, zeroed. The caller checked sqFree.
func (r *ring) nextSQE() *sqe {
	idx := r.sqLocalTail & r.sqMask
	s := &r.sqes[idx]
	*s = sqe{}
	r.sqArray[idx] = idx
	r.sqLocalTail++
	return s
}

// publish makes the filled SQEs visible to the kernel (store-release of the tail).
func (r *ring) publish() { atomic.StoreUint32(r.sqTail, r.sqLocalTail) }

// enter calls io_uring_enter; it returns how many SQEs the kernel consumed.
func (r *ring) enter(toSubmit, minComplete uint32, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// reap calls fn for every available CQE and releases them to the kernel.
func (r *ring) reap(fn func(userData uint64, res int32)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail) // load-acquire: CQE contents are visible
	n := 0
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		fn(c.userData, c.res)
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

func (r *ring) close() error {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && (r.sqMem == nil || &r.cqMem[0] != &r.sqMem[0]) {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	r.sqes, r.cqes, r.sqArray = nil, nil, nil
	if r.fd >= 0 {
		err := unix.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}
