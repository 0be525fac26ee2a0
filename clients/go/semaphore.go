package concord

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

// Permit is a held share of a semaphore. It renews itself every ttl/3 until Release.
type Permit struct {
	Name string
	// ID identifies this holder to Release and Refresh (the stubs') calls.
	ID string

	client semaphorev1.SemaphoreServiceClient
	*keeper
}

// AcquireSemaphore takes one permit (WithPermits: n, all or none) of the
// semaphore name, of which at most limit are held at once, waiting in FIFO order
// until granted or ctx ends (then the error wraps ErrNotAcquired).
//
// limit must be the semaphore's stored limit, set by SetSemaphoreLimit or by the
// first Acquire that finds none, and changed only by SetSemaphoreLimit: another
// limit fails with ErrSemaphoreLimitMismatch (FAILED_PRECONDITION) and takes
// nothing. Pass 0 to use the stored limit (ErrNotFound when there is none).
func AcquireSemaphore(ctx context.Context, client semaphorev1.SemaphoreServiceClient, name string, limit uint32,
	ttl time.Duration, opts ...Option) (*Permit, error) {
	o := collect(opts)
	var resp *semaphorev1.AcquireResponse
	err := waitFor(ctx, o, func(ctx context.Context, wait time.Duration) (bool, error) {
		var err error
		resp, err = client.Acquire(ctx, &semaphorev1.AcquireRequest{
			Name: name, Limit: limit, Permits: o.permits, Ttl: durationpb.New(ttl),
			WaitTimeout: durationpb.New(wait), Owner: o.owner,
		})
		return resp.GetAcquired(), err
	})
	if err != nil {
		return nil, fmt.Errorf("concord: semaphore %q: %w", name, err)
	}
	p := &Permit{Name: name, ID: resp.GetPermitId(), client: client}
	p.keeper = keep(ttl, func(ctx context.Context) error {
		_, err := client.Refresh(ctx, &semaphorev1.RefreshRequest{Name: name, PermitId: p.ID, Ttl: durationpb.New(ttl)})
		return err
	})
	return p, nil
}

// Release stops the renewal and returns the permits, admitting the waiters that
// now fit. If they were lost before, the error wraps ErrLost.
func (p *Permit) Release(ctx context.Context) error {
	return p.letGo(ctx, fmt.Sprintf("release semaphore %q", p.Name), func(ctx context.Context) error {
		_, err := p.client.Release(ctx, &semaphorev1.ReleaseRequest{Name: p.Name, PermitId: p.ID})
		return err
	})
}

// SetSemaphoreLimit sets the limit of the semaphore name (1 to the server's
// --max-semaphore-limit), kept until the next SetSemaphoreLimit; it returns the
// limit before (0: none). A lower limit takes no permit back: grants wait until
// the held permits fit under it, and a queued request for more permits than it
// fails with ErrPermitsExceedLimit. A higher one admits the waiters that now fit
// at once. It is retried on UNAVAILABLE (see Retries): a repeat whose first try
// took effect returns the new limit as the one before.
func SetSemaphoreLimit(ctx context.Context, client semaphorev1.SemaphoreServiceClient, name string,
	limit uint32) (uint32, error) {
	resp, err := client.SetLimit(ctx, &semaphorev1.SetLimitRequest{Name: name, Limit: limit})
	if err != nil {
		return 0, fmt.Errorf("concord: set the limit of semaphore %q: %w", name, err)
	}
	return resp.GetPreviousLimit(), nil
}
