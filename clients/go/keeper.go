package concord

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// keeper renews a lease in the background every ttl/3 until halted. It gives the
// lease up as lost when the server refuses a renewal, or when no renewal has been
// confirmed by the time the last confirmed one would expire: past that point the
// server may have handed the lease to someone else, so claiming it would be a lie.
// Transient failures (UNAVAILABLE, a slow call) are retried sooner until then.
type keeper struct {
	stop context.CancelFunc
	done chan struct{} // closed when the goroutine has returned
	lost chan struct{} // closed when the lease is lost; err says why

	mu  sync.Mutex
	err error
}

// keep starts renewing a lease just granted for ttl. Its expiry is tracked on
// this machine's monotonic clock, never the server's wall clock, so clock skew
// between the two cannot make a lost lease look held.
func keep(ttl time.Duration, renew func(context.Context) error) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{stop: cancel, done: make(chan struct{}), lost: make(chan struct{})}
	go k.run(ctx, ttl, time.Now().Add(ttl), renew)
	return k
}

func (k *keeper) run(ctx context.Context, ttl time.Duration, validUntil time.Time, renew func(context.Context) error) {
	defer close(k.done)
	period := ttl / 3
	timer := time.NewTimer(period)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		// A slow renewal may still count, but not one confirmed after the lease would expire.
		call, cancel := context.WithDeadline(ctx, validUntil)
		err := renew(call)
		cancel()
		switch {
		case ctx.Err() != nil: // halted meanwhile: the release decides what happened
			return
		case err == nil:
			validUntil = sent.Add(ttl)
			timer.Reset(period)
		case refused(err):
			k.fail(err)
			return
		case !time.Now().Before(validUntil):
			k.fail(fmt.Errorf("no renewal confirmed within the ttl: %w", err))
			return
		default:
			timer.Reset(min(period, max(10*time.Millisecond, time.Until(validUntil)/4)))
		}
	}
}

func (k *keeper) fail(cause error) {
	k.mu.Lock()
	k.err = fmt.Errorf("%w: %w", ErrLost, cause)
	k.mu.Unlock()
	close(k.lost)
}

// Lost is closed when background renewal finds the lease lost; Err then says why.
func (k *keeper) Lost() <-chan struct{} { return k.lost }

// Err is nil while the lease is held (as far as renewal knows), else it wraps
// ErrLost and the server's answer.
func (k *keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// halt stops renewing, waits for the goroutine to end and returns Err.
func (k *keeper) halt() error {
	k.stop()
	<-k.done
	return k.Err()
}

// letGo halts the renewal, then gives the lease back with release. A lease that
// was lost, or that the server no longer knows, is an error wrapping ErrLost;
// errors start with what ("unlock \"orders:42\"").
func (k *keeper) letGo(ctx context.Context, what string, release func(context.Context) error) error {
	err := k.halt()
	if err == nil {
		if err = release(ctx); refused(err) {
			err = fmt.Errorf("%w: %w", ErrLost, err)
		}
	}
	if err != nil {
		return fmt.Errorf("concord: %s: %w", what, err)
	}
	return nil
}
