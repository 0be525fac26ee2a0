package concord_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"go.concord.dev/concord"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

// connect dials the live server named by CONCORD_ADDR. tests/test_polyglot.py
// starts one and sets it; by hand: `make run`, then
// CONCORD_ADDR=127.0.0.1:50051 go test ./...
func connect(t *testing.T) *concord.Client {
	t.Helper()
	addr := os.Getenv("CONCORD_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CONCORD_ADDR is not set; CI must run these tests against a live server")
		}
		t.Skip("CONCORD_ADDR is not set: start a server (`make run`) and set CONCORD_ADDR=127.0.0.1:50051")
	}
	c, err := concord.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unique is a resource name no other test (or earlier run) uses.
func unique(t *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "go:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + hex.EncodeToString(b)
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// mustLock takes the lock within 5 s or fails the test.
func mustLock(t *testing.T, c *concord.Client, name string, ttl time.Duration, opts ...concord.Option) *concord.Lease {
	t.Helper()
	lease, err := concord.Lock(within(t, 5*time.Second), c.Locks, name, ttl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func describe(t *testing.T, c *concord.Client, name string) *lockv1.DescribeResponse {
	t.Helper()
	d, err := c.Locks.Describe(within(t, 5*time.Second), &lockv1.DescribeRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLeaseRenewsItselfUntilUnlock(t *testing.T) {
	t.Parallel() // independent: every test has names of its own
	c, name := connect(t), unique(t)
	const ttl = 2 * time.Second
	lease := mustLock(t, c, name, ttl, concord.WithOwner("go-test"))
	first := describe(t, c, name).GetExpiresAt().AsTime()
	// Still ours, with an expiry that only a renewal sent after the first expiry explains.
	eventually(t, "a renewal past the first expiry", func() bool {
		if err := lease.Err(); err != nil {
			t.Fatalf("lease lost while held: %v", err)
		}
		d := describe(t, c, name)
		if !d.GetHeld() || d.GetFencingToken() != lease.FencingToken || d.GetOwner() != "go-test" {
			t.Fatalf("the lock should still be ours: %v", d)
		}
		return d.GetExpiresAt().AsTime().After(first.Add(ttl))
	})
	if err := lease.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := describe(t, c, name); d.GetHeld() {
		t.Fatalf("still held after Unlock: %v", d)
	}
}

func TestLockWaitsInLineForUnlock(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	first := mustLock(t, c, name, 10*time.Second)
	got := make(chan *concord.Lease)
	go func() {
		second, err := concord.Lock(within(t, 20*time.Second), c.Locks, name, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- second
	}()
	eventually(t, "the second caller to queue", func() bool { return describe(t, c, name).GetWaiters() == 1 })
	if err := first.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil || second.FencingToken <= first.FencingToken {
		t.Fatalf("fencing tokens must increase: first %d, second %v", first.FencingToken, second)
	}
	if err := second.Unlock(within(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestLockGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	held := mustLock(t, c, name, 10*time.Second)
	defer held.Unlock(context.Background())
	start := time.Now()
	if _, err := concord.Lock(within(t, 300*time.Millisecond), c.Locks, name, time.Second); !errors.Is(err, concord.ErrNotAcquired) {
		t.Fatalf("want ErrNotAcquired, got %v", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("waited %v for a 300ms deadline", waited)
	}
	if _, err := concord.Lock(within(t, 5*time.Second), c.Locks, name, time.Second, concord.TryOnce()); !errors.Is(err, concord.ErrNotAcquired) {
		t.Fatalf("TryOnce: want ErrNotAcquired, got %v", err)
	}
}

func TestUnlockReportsALostLease(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	lease := mustLock(t, c, name, 2*time.Second)
	// Someone with the lease ID lets it go behind the Lease's back: the next renewal is refused.
	if _, err := c.Locks.Release(within(t, 5*time.Second), &lockv1.ReleaseRequest{Name: name, Lease: lease.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("renewal did not notice the lost lock")
	}
	err := lease.Unlock(within(t, 5*time.Second))
	if !errors.Is(err, concord.ErrLost) || !errors.Is(err, concord.ErrLockNotHeld) || concord.Reason(err) != "LOCK_NOT_HELD" {
		t.Fatalf("want ErrLost with reason LOCK_NOT_HELD, got %v (reason %q)", err, concord.Reason(err))
	}
}

func TestErrorsCarryCodeAndReason(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	_, err := c.Locks.Release(within(t, 5*time.Second), &lockv1.ReleaseRequest{Name: name, Lease: "not-a-lease"})
	if status.Code(err) != codes.FailedPrecondition || concord.Reason(err) != "LOCK_NOT_HELD" {
		t.Fatalf("want FailedPrecondition/LOCK_NOT_HELD, got %v (reason %q)", err, concord.Reason(err))
	}
	var cerr *concord.Error
	if !errors.As(err, &cerr) || cerr.Code != codes.FailedPrecondition || cerr.Metadata["name"] != name {
		t.Fatalf("want a *concord.Error with the lock's name in its metadata, got %#v", err)
	}
	if !errors.Is(err, concord.ErrLockNotHeld) || errors.Is(err, concord.ErrPermitNotHeld) {
		t.Fatalf("errors.Is should match ErrLockNotHeld only: %v", err)
	}
	_, err = c.Locks.Describe(within(t, 5*time.Second), &lockv1.DescribeRequest{Name: ""})
	if status.Code(err) != codes.InvalidArgument || !errors.Is(err, concord.ErrInvalidArgument) {
		t.Fatalf("want InvalidArgument/INVALID_ARGUMENT, got %v", err)
	}
	// A stream's failure is an *Error too.
	hold, err := c.Locks.Hold(within(t, 5*time.Second), &lockv1.HoldRequest{Name: ""})
	if err == nil {
		_, err = hold.Recv()
	}
	if !errors.Is(err, concord.ErrInvalidArgument) {
		t.Fatalf("Hold with no name: want INVALID_ARGUMENT, got %v", err)
	}
}

func TestSemaphoreAdmitsUpToItsLimit(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	a, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 3, 5*time.Second, concord.WithPermits(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 3, 5*time.Second, concord.TryOnce()); !errors.Is(err, concord.ErrNotAcquired) {
		t.Fatalf("a fourth permit of 3: want ErrNotAcquired, got %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 3, 5*time.Second, concord.WithPermits(2), concord.TryOnce())
	if err != nil {
		t.Fatalf("two permits freed, two asked: %v", err)
	}
	for _, p := range []*concord.Permit{a, d} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func describeSemaphore(t *testing.T, c *concord.Client, name string) *semaphorev1.DescribeResponse {
	t.Helper()
	d, err := c.Semaphores.Describe(within(t, 5*time.Second), &semaphorev1.DescribeRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSemaphoreLimitIsChangedOnlyBySetLimit(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	if _, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 0, 5*time.Second, concord.TryOnce()); !errors.Is(err, concord.ErrNotFound) {
		t.Fatalf("limit 0 before any limit is stored: want ErrNotFound, got %v", err)
	}
	first, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 1, 10*time.Second) // stores the limit 1
	if err != nil {
		t.Fatal(err)
	}
	_, err = concord.AcquireSemaphore(ctx, c.Semaphores, name, 2, 5*time.Second, concord.TryOnce())
	var cerr *concord.Error
	if !errors.Is(err, concord.ErrSemaphoreLimitMismatch) || !errors.As(err, &cerr) || cerr.Code != codes.FailedPrecondition ||
		cerr.Metadata["limit"] != "1" || cerr.Metadata["requested"] != "2" {
		t.Fatalf("another limit: want ErrSemaphoreLimitMismatch (stored 1, requested 2), got %#v", err)
	}
	if d := describeSemaphore(t, c, name); d.GetLimit() != 1 || d.GetHeld() != 1 || len(d.GetHolders()) != 1 {
		t.Fatalf("a refused Acquire must change nothing: %v", d)
	}
	// A waiter (limit 0: the stored one) queued behind the holder is admitted as soon as the limit is raised.
	got := make(chan *concord.Permit, 1)
	go func() {
		p, err := concord.AcquireSemaphore(ctx, c.Semaphores, name, 0, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	eventually(t, "the waiter to queue", func() bool { return describeSemaphore(t, c, name).GetWaiters() == 1 })
	previous, err := concord.SetSemaphoreLimit(ctx, c.Semaphores, name, 2)
	if err != nil || previous != 1 {
		t.Fatalf("SetSemaphoreLimit: want previous 1, got %d, %v", previous, err)
	}
	var second *concord.Permit
	select {
	case second = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("raising the limit did not admit the waiter")
	}
	if d := describeSemaphore(t, c, name); second == nil || d.GetLimit() != 2 || d.GetHeld() != 2 {
		t.Fatalf("want limit 2 with 2 held, got %v", d)
	}
	if _, err := concord.SetSemaphoreLimit(ctx, c.Semaphores, name, 0); !errors.Is(err, concord.ErrInvalidArgument) {
		t.Fatalf("SetSemaphoreLimit 0: want ErrInvalidArgument, got %v", err)
	}
	for _, p := range []*concord.Permit{first, second} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
