package concord

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Option adjusts Lock, AcquireSemaphore and Election.Campaign.
type Option func(*options)

type options struct {
	owner   string
	permits uint32
	tryOnce bool
	ttl     time.Duration
}

// WithOwner labels the holder in Describe, or the candidate in an election's
// Leader and Observe (the server defaults to the caller's address).
func WithOwner(owner string) Option { return func(o *options) { o.owner = owner } }

// WithTTL sets how long a Campaign's leadership lasts without a renewal
// (default DefaultElectionTTL): a leader whose connection hangs is replaced
// within it. Lock and AcquireSemaphore take their TTL as an argument instead.
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithPermits takes n permits of a semaphore at once, all or none (default 1).
func WithPermits(n uint32) Option { return func(o *options) { o.permits = n } }

// TryOnce asks once instead of waiting: ErrNotAcquired unless granted at once.
func TryOnce() Option { return func(o *options) { o.tryOnce = true } }

func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

const (
	// longestWait bounds one server-side wait when ctx has no deadline; the next
	// call re-joins the FIFO queue. Bounded calls notice a dead connection sooner.
	longestWait = 5 * time.Minute
	// replyMargin leaves the server time to answer "not acquired" before the
	// call's own deadline cuts it off, so a grant is never lost in between.
	replyMargin = 100 * time.Millisecond
)

// acquireFunc makes one Acquire call that waits up to wait in the server's FIFO
// queue, and reports whether it was granted.
type acquireFunc func(ctx context.Context, wait time.Duration) (bool, error)

// waitFor calls acquire until it is granted, ctx ends, or (TryOnce) once.
func waitFor(ctx context.Context, o options, acquire acquireFunc) error {
	for {
		wait := longestWait
		if o.tryOnce {
			wait = 0
		} else if deadline, ok := ctx.Deadline(); ok {
			wait = max(0, min(wait, time.Until(deadline)-replyMargin))
		}
		granted, err := acquire(ctx, wait)
		switch {
		case err == nil && granted:
			return nil
		case status.Code(err) == codes.DeadlineExceeded, errors.Is(err, context.DeadlineExceeded):
			return ErrNotAcquired
		case err != nil:
			return err
		case o.tryOnce || wait < longestWait:
			return ErrNotAcquired
		}
	}
}
