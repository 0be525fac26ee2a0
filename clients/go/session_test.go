package concord_test

// The sessions (session.go) against the live server: the same behaviours that
// tests/test_lock_session.py checks of the async Python client's session.

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"go.concord.dev/concord"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	rwlockv1 "go.concord.dev/concord/gen/concord/rwlock/v1"
	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

func acquireReq(name string, wait time.Duration) *lockv1.AcquireRequest {
	return &lockv1.AcquireRequest{Name: name, Ttl: durationpb.New(30 * time.Second), WaitTimeout: durationpb.New(wait)}
}

// lockSession is the Client's Locks, which NewClient makes a session.
func lockSession(t *testing.T, c *concord.Client) *concord.LockSession {
	t.Helper()
	s, ok := c.Locks.(*concord.LockSession)
	if !ok {
		t.Fatalf("Client.Locks is a %T, not a *LockSession", c.Locks)
	}
	return s
}

// wantReason fails unless err is the *Error a unary call fails with for code and reason.
func wantReason(t *testing.T, err error, sentinel *concord.Error, code codes.Code) *concord.Error {
	t.Helper()
	var e *concord.Error
	if !errors.As(err, &e) || !errors.Is(err, sentinel) || e.Code != code || status.Code(err) != code {
		t.Fatalf("got %v (%T), want %s (%s)", err, err, sentinel.Reason, code)
	}
	return e
}

func TestSessionLocksRefreshesAndReleases(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	s := lockSession(t, c)
	got, err := s.Acquire(within(t, 5*time.Second), acquireReq(name, 0))
	if err != nil || !got.GetAcquired() || got.GetFencingToken() == 0 {
		t.Fatalf("acquire: %v, %v", got, err)
	}
	refreshed, err := s.Refresh(within(t, 5*time.Second),
		&lockv1.RefreshRequest{Name: name, Lease: got.GetLease(), Ttl: durationpb.New(time.Minute)})
	if err != nil || !refreshed.GetExpiresAt().AsTime().After(got.GetExpiresAt().AsTime()) {
		t.Fatalf("refresh: %v, %v (granted until %v)", refreshed, err, got.GetExpiresAt().AsTime())
	}
	if d := describe(t, c, name); !d.GetHeld() || d.GetFencingToken() != got.GetFencingToken() {
		t.Fatalf("not held after the session's Acquire: %v", d)
	}
	if _, err := s.Release(within(t, 5*time.Second), &lockv1.ReleaseRequest{Name: name, Lease: got.GetLease()}); err != nil {
		t.Fatal(err)
	}
	if d := describe(t, c, name); d.GetHeld() {
		t.Fatalf("still held after the session's Release: %v", d)
	}
	// The helpers work on the session unchanged: Lock renews over it, Unlock releases.
	lease := mustLock(t, c, name, 2*time.Second)
	first := describe(t, c, name).GetExpiresAt().AsTime()
	eventually(t, "a renewal over the session", func() bool {
		return describe(t, c, name).GetExpiresAt().AsTime().After(first)
	})
	if err := lease.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := describe(t, c, name); d.GetHeld() {
		t.Fatalf("still held after Unlock: %v", d)
	}
}

func TestSessionErrorsCarryCodeAndReason(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	s := lockSession(t, c)
	_, err := s.Release(within(t, 5*time.Second), &lockv1.ReleaseRequest{Name: name, Lease: "00000000000000000000000000000000"})
	if e := wantReason(t, err, concord.ErrLockNotHeld, codes.FailedPrecondition); e.Metadata["name"] != name {
		t.Fatalf("metadata %v, want name %q", e.Metadata, name)
	}
	_, err = s.Acquire(within(t, 5*time.Second), acquireReq("", 0))
	if e := wantReason(t, err, concord.ErrInvalidArgument, codes.InvalidArgument); e.Metadata["field"] != "name" {
		t.Fatalf("metadata %v, want field name", e.Metadata)
	}
	// The errors answered nothing else: the stream goes on.
	if got, err := s.Acquire(within(t, 5*time.Second), acquireReq(name, 0)); err != nil || !got.GetAcquired() {
		t.Fatalf("acquire after the errors: %v, %v", got, err)
	}

	_, err = c.Semaphores.Release(within(t, 5*time.Second), &semaphorev1.ReleaseRequest{Name: name, PermitId: "nobody"})
	if _, ok := c.Semaphores.(*concord.SemaphoreSession); !ok {
		t.Fatalf("Client.Semaphores is a %T, not a *SemaphoreSession", c.Semaphores)
	}
	wantReason(t, err, concord.ErrPermitNotHeld, codes.FailedPrecondition)

	// A lease lost meanwhile: Unlock over the session reports it as a unary Release would.
	other := unique(t)
	lease := mustLock(t, c, other, 30*time.Second)
	if _, err := c.Locks.ForceRelease(within(t, 5*time.Second), &lockv1.ForceReleaseRequest{Name: other}); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(within(t, 5*time.Second)); !errors.Is(err, concord.ErrLost) || !errors.Is(err, concord.ErrLockNotHeld) {
		t.Fatalf("Unlock of a lost lease: %v", err)
	}
}

// free: nobody holds the lock and nobody waits for it.
func free(t *testing.T, c *concord.Client, name string) func() bool {
	return func() bool {
		d := describe(t, c, name)
		return !d.GetHeld() && d.GetWaiters() == 0
	}
}

func TestAnAbandonedSessionAcquireNeverLeavesTheLockHeld(t *testing.T) {
	t.Parallel()
	holder, waiter, name := connect(t), connect(t), unique(t)
	held := mustLock(t, holder, name, 30*time.Second)
	for range 20 { // each is cancelled while it waits
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := waiter.Locks.Acquire(ctx, acquireReq(name, 30*time.Second))
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("an Acquire past its ctx's deadline: %v, want DEADLINE_EXCEEDED", err)
		}
	}
	if err := held.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock free, no waiter left", free(t, holder, name))

	// Now the cancel races the grant: the holder lets go just before or just after
	// the waiter's caller stops waiting. A grant that wins is given back at once.
	hs := lockSession(t, holder)
	for i := range 60 {
		got, err := hs.Acquire(within(t, 5*time.Second), acquireReq(name, 5*time.Second))
		if err != nil || !got.GetAcquired() {
			t.Fatalf("round %d: the holder could not take the free lock: %v, %v", i, got, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // (called in every round below; this is for a t.Fatal on the way)
		done := make(chan *lockv1.AcquireResponse, 1)
		go func() {
			r, _ := waiter.Locks.Acquire(ctx, acquireReq(name, 30*time.Second))
			done <- r
		}()
		eventually(t, "the waiter queued", func() bool { return describe(t, holder, name).GetWaiters() == 1 })
		release := func() error {
			_, err := hs.Release(within(t, 5*time.Second), &lockv1.ReleaseRequest{Name: name, Lease: got.GetLease()})
			return err
		}
		released := make(chan error, 1)
		switch i % 3 {
		case 0: // the cancel first
			cancel()
			released <- release()
		case 1: // both at once, the cancel a little later each round (a spread of timings, not a wait for anything)
			go func() { released <- release() }()
			time.Sleep(time.Duration(i) * 25 * time.Microsecond)
			cancel()
		case 2: // the release first
			released <- release()
			cancel()
		}
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.GetAcquired() { // answered before its caller stopped: it is the caller's
			if _, err := waiter.Locks.Release(within(t, 5*time.Second),
				&lockv1.ReleaseRequest{Name: name, Lease: r.GetLease()}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "the lock free after round", free(t, holder, name))
	}
}

// proxy forwards TCP connections to target until cut, which breaks every
// connection through it so far (new ones are still forwarded).
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &proxy{addr: l.Addr().String()}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestABrokenSessionFailsItsRequestsAndTheNextOneReopens(t *testing.T) {
	t.Parallel()
	direct, name := connect(t), unique(t)
	p := startProxy(t, os.Getenv("CONCORD_ADDR"))
	c, err := concord.NewClient(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	held := mustLock(t, c, name, 30*time.Second)
	waiting := make(chan error, 1)
	go func() {
		_, err := concord.Lock(within(t, 20*time.Second), c.Locks, name, 30*time.Second)
		waiting <- err
	}()
	eventually(t, "the waiter queued", func() bool { return describe(t, direct, name).GetWaiters() == 1 })
	p.cut()
	select {
	case err := <-waiting:
		if status.Code(err) != codes.Unavailable || errors.Is(err, concord.ErrNotAcquired) {
			t.Fatalf("the in-flight Acquire on a broken stream: %v, want UNAVAILABLE", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight Acquire was not failed when its stream broke")
	}
	eventually(t, "the server to let the broken stream's wait go", func() bool {
		return describe(t, direct, name).GetWaiters() == 0
	})
	// The lease is the client's, not the stream's: still held, released over a new stream.
	if d := describe(t, direct, name); !d.GetHeld() || d.GetFencingToken() != held.FencingToken {
		t.Fatalf("the lease did not outlive its stream: %v", d)
	}
	if err := held.Unlock(within(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock over a new stream: %v", err)
	}
	again := mustLock(t, c, name, 30*time.Second)
	if err := again.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsHandTheLockOverInFIFOOrder(t *testing.T) {
	t.Parallel()
	a, b, c, name := connect(t), connect(t), connect(t), unique(t)
	first := mustLock(t, a, name, 30*time.Second)
	type grant struct {
		who   string
		lease *concord.Lease
	}
	granted := make(chan grant, 2)
	lock := func(who string, client *concord.Client) {
		lease, err := concord.Lock(within(t, 20*time.Second), client.Locks, name, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		granted <- grant{who, lease}
	}
	go lock("b", b)
	eventually(t, "b queued", func() bool { return describe(t, a, name).GetWaiters() == 1 })
	go lock("c", c)
	eventually(t, "c queued behind b", func() bool { return describe(t, a, name).GetWaiters() == 2 })
	if err := first.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	second := <-granted
	if second.who != "b" || second.lease == nil || second.lease.FencingToken <= first.FencingToken {
		t.Fatalf("after a's release: %s got it (%v), want b", second.who, second.lease)
	}
	if d := describe(t, a, name); d.GetWaiters() != 1 {
		t.Fatalf("c should still wait: %v", d)
	}
	if err := second.lease.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	third := <-granted
	if third.who != "c" || third.lease == nil || third.lease.FencingToken <= second.lease.FencingToken {
		t.Fatalf("after b's release: %s got it (%v), want c", third.who, third.lease)
	}
	if err := third.lease.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoreSessionAdmitsUpToItsLimit(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	one, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	two, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphores.Refresh(ctx, &semaphorev1.RefreshRequest{Name: name, PermitId: two.ID,
		Ttl: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	third := make(chan *concord.Permit, 1)
	go func() {
		p, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 2, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		third <- p
	}()
	eventually(t, "the third to queue", func() bool { return describeSemaphore(t, c, name).GetWaiters() == 1 })
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p := <-third
	if p == nil {
		t.FailNow()
	}
	if d := describeSemaphore(t, c, name); d.GetHeld() != 2 || d.GetWaiters() != 0 {
		t.Fatalf("after the handoff: %v", d)
	}
	for _, p := range []*concord.Permit{two, p} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := describeSemaphore(t, c, name); d.GetHeld() != 0 {
		t.Fatalf("permits left after release: %v", d)
	}
}

func TestReadWriteLockSessionSharesReadsAndQueuesTheWriter(t *testing.T) {
	t.Parallel()
	connect(t) // skips without a server
	name := unique(t)
	// A connection without the Client's interceptors: the session's errors are
	// still *Error, and its retries its own.
	conn, err := grpc.NewClient(os.Getenv("CONCORD_ADDR"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := concord.NewReadWriteLockSession(rwlockv1.NewReadWriteLockServiceClient(conn))
	t.Cleanup(func() { s.Close() })
	var _ rwlockv1.ReadWriteLockServiceClient = s
	ctx := within(t, 20*time.Second)
	acquire := func(ctx context.Context, mode rwlockv1.Mode, wait time.Duration) (*rwlockv1.AcquireResponse, error) {
		return s.Acquire(ctx, &rwlockv1.AcquireRequest{Name: name, Mode: mode, Ttl: durationpb.New(30 * time.Second),
			WaitTimeout: durationpb.New(wait)})
	}
	var readers []*rwlockv1.AcquireResponse
	for range 2 {
		r, err := acquire(ctx, rwlockv1.Mode_MODE_READ, 0)
		if err != nil || !r.GetAcquired() {
			t.Fatalf("reader: %v, %v", r, err)
		}
		readers = append(readers, r)
	}
	writer := make(chan *rwlockv1.AcquireResponse, 1)
	go func() {
		w, err := acquire(ctx, rwlockv1.Mode_MODE_WRITE, 15*time.Second)
		if err != nil {
			t.Error(err)
		}
		writer <- w
	}()
	describeRW := func() *rwlockv1.DescribeResponse {
		d, err := s.Describe(ctx, &rwlockv1.DescribeRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	eventually(t, "the writer queued", func() bool { return len(describeRW().GetWaiters()) == 1 })
	// An abandoned write Acquire leaves nothing behind either.
	abandoned, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := acquire(abandoned, rwlockv1.Mode_MODE_WRITE, 15*time.Second); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("an abandoned Acquire: %v", err)
	}
	cancel()
	eventually(t, "the abandoned writer gone", func() bool { return len(describeRW().GetWaiters()) == 1 })
	for _, r := range readers {
		if _, err := s.Refresh(ctx, &rwlockv1.RefreshRequest{Name: name, Lease: r.GetLease(),
			Ttl: durationpb.New(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &rwlockv1.ReleaseRequest{Name: name, Lease: r.GetLease()}); err != nil {
			t.Fatal(err)
		}
	}
	w := <-writer
	if !w.GetAcquired() || w.GetFencingToken() <= readers[1].GetFencingToken() {
		t.Fatalf("the writer after the readers: %v", w)
	}
	if d := describeRW(); d.GetWriter().GetFencingToken() != w.GetFencingToken() || len(d.GetReaders()) != 0 {
		t.Fatalf("not the writer's: %v", d)
	}
	if _, err := s.Release(ctx, &rwlockv1.ReleaseRequest{Name: name, Lease: w.GetLease()}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Release(ctx, &rwlockv1.ReleaseRequest{Name: name, Lease: w.GetLease()})
	wantReason(t, err, concord.ErrLockNotHeld, codes.FailedPrecondition)
}
