package netfetch

import (
	"errors"
	"testing"
	"time"
)

// TestMemoryPoolRecyclesWithinLimit: buffers come in classes and are reused; the count of
// buffers made never passes the limit; free buffers of another class are dropped to make
// room; a request that cannot fit waits until its deadline; the idle trim empties the pool.
func TestMemoryPoolRecyclesWithinLimit(t *testing.T) {
	p := newMemoryPool(4 << 20)
	for _, tc := range []struct{ want, n, cap int }{
		{100 << 10, 100 << 10, 128 << 10},
		{1 << 20, 100 << 20, 1 << 20},
		{(1 << 20) + 1, 100 << 20, 2 << 20},
		{3 << 20, 3 << 20, 4 << 20},
		{5 << 20, 5 << 20, 5 << 20}, // over the limit as a class: exact
	} {
		if got := p.capFor(tc.want, tc.n); got != tc.cap {
			t.Errorf("capFor(%d, %d) = %d, want %d", tc.want, tc.n, got, tc.cap)
		}
	}
	a, _, err := p.acquire(2<<20, nil, time.Time{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := p.acquire(2<<20, nil, time.Time{}, nil, nil)
	p.recycle(a)
	c, _, _ := p.acquire(2<<20, nil, time.Time{}, nil, nil) // a, reused
	if &c[:1][0] != &a[:1][0] {
		t.Error("a free buffer of the class was not reused")
	}
	p.recycle(b) // free: 2 MiB; held: 2 MiB (c)
	if used, _, held := p.usage(); used != 4<<20 || held != 2<<20 {
		t.Fatalf("used %d held %d", used, held)
	}
	// 1 MiB: the free 2 MiB buffer is reused (no garbage) rather than dropped for a new one.
	d, _, err := p.acquire(1<<20, nil, time.Time{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if used, peak, held := p.usage(); cap(d) != 2<<20 || used != 4<<20 || held != 4<<20 || peak != 4<<20 {
		t.Fatalf("1 MiB with a free 2 MiB buffer: cap %d, used %d held %d peak %d", cap(d), used, held, peak)
	}
	// 2 MiB more cannot fit while c and d are held: it waits until its deadline.
	waited := make(chan struct{}, 1)
	_, _, err = p.acquire(2<<20, nil, time.Now().Add(50*time.Millisecond), nil, func() { waited <- struct{}{} })
	var me *errMemory
	if !errors.As(err, &me) || len(waited) != 1 {
		t.Fatalf("acquire over the limit: %v (waited %d)", err, len(waited))
	}
	// A release wakes a waiter.
	got := make(chan error, 1)
	go func() {
		_, _, err := p.acquire(2<<20, nil, time.Now().Add(time.Minute), nil, nil)
		got <- err
	}()
	p.recycle(d)
	p.recycle(c) // c's class fits the waiter
	if err := <-got; err != nil {
		t.Fatalf("waiter after releases: %v", err)
	}
	p.close()
	if used, _, held := p.usage(); held != 2<<20 || used != 2<<20 {
		t.Fatalf("after close: used %d held %d, want only the waiter's buffer", used, held)
	}

	// 2 MiB with only smaller free buffers: they are dropped to make room.
	e := newMemoryPool(4 << 20)
	x, _, _ := e.acquire(2<<20, nil, time.Time{}, nil, nil)
	y, _, _ := e.acquire(1<<20, nil, time.Time{}, nil, nil)
	z, _, _ := e.acquire(1<<20, nil, time.Time{}, nil, nil)
	e.recycle(y)
	e.recycle(z)
	w, _, err := e.acquire(2<<20, nil, time.Now().Add(50*time.Millisecond), nil, nil)
	if used, _, held := e.usage(); err != nil || cap(w) != 2<<20 || used != 4<<20 || held != 4<<20 {
		t.Fatalf("2 MiB over two free 1 MiB buffers: %v, used %d held %d", err, used, held)
	}
	_ = x

	// A request as large as the pool grows without waiting for itself.
	q := newMemoryPool(3 << 20)
	two, _, _ := q.acquire(q.capFor(2<<20, 3<<20), nil, time.Time{}, nil, nil)
	three, dropped, err := q.acquire(q.capFor(4<<20, 3<<20), two, time.Now().Add(50*time.Millisecond), nil, nil)
	if err != nil || !dropped || cap(three) != 3<<20 {
		t.Fatalf("growth to the pool size: cap %d dropped %v err %v", cap(three), dropped, err)
	}
	if used, _, held := q.usage(); used != 3<<20 || held != 3<<20 {
		t.Fatalf("after the growth: used %d held %d", used, held)
	}
}
