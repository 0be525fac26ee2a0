package concord

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
)

// Lease is a held lock. It renews itself every ttl/3 until Unlock.
type Lease struct {
	Name string
	// ID proves ownership to Release and Refresh (the stubs') calls.
	ID string
	// FencingToken strictly increases with every grant of this lock name: pass
	// it to whatever the lock protects, and have that reject older tokens.
	FencingToken uint64

	client lockv1.LockServiceClient
	*keeper
}

// Lock takes the lock name, waiting in FIFO order until it is granted or ctx
// ends (then the error wraps ErrNotAcquired). The lock expires ttl after its last
// renewal, so a holder that dies frees it within ttl.
func Lock(ctx context.Context, client lockv1.LockServiceClient, name string, ttl time.Duration, opts ...Option) (*Lease, error) {
	o := collect(opts)
	var resp *lockv1.AcquireResponse
	err := waitFor(ctx, o, func(ctx context.Context, wait time.Duration) (bool, error) {
		var err error
		resp, err = client.Acquire(ctx, &lockv1.AcquireRequest{
			Name: name, Ttl: durationpb.New(ttl), WaitTimeout: durationpb.New(wait), Owner: o.owner,
		})
		return resp.GetAcquired(), err
	})
	if err != nil {
		return nil, fmt.Errorf("concord: lock %q: %w", name, err)
	}
	l := &Lease{Name: name, ID: resp.GetLease(), FencingToken: resp.GetFencingToken(), client: client}
	l.keeper = keep(ttl, func(ctx context.Context) error {
		_, err := client.Refresh(ctx, &lockv1.RefreshRequest{Name: name, Lease: l.ID, Ttl: durationpb.New(ttl)})
		return err
	})
	return l, nil
}

// Unlock stops the renewal and releases the lock, handing it to the next waiter.
// If the lock was lost before, the error wraps ErrLost.
func (l *Lease) Unlock(ctx context.Context) error {
	return l.letGo(ctx, fmt.Sprintf("unlock %q", l.Name), func(ctx context.Context) error {
		_, err := l.client.Release(ctx, &lockv1.ReleaseRequest{Name: l.Name, Lease: l.ID})
		return err
	})
}
