package concord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	electionv1 "go.concord.dev/concord/gen/concord/election/v1"
)

// Elections: one leader per election name among any number of candidates, like
// etcd's concurrency.Election (protos/concord/election/v1/election.proto).
//
//	e := client.Election("scheduler")
//	l, err := e.Campaign(ctx, []byte("10.0.0.7:8080"))  // waits in FIFO order until elected or ctx ends
//	if err != nil {
//		return err  // wraps ErrNotAcquired when ctx ended first
//	}
//	defer l.Resign(context.Background())  // hands leadership to the next candidate at once
//	for {
//		select {
//		case <-l.Done():  // the leadership ended: l.Err() wraps ErrLost
//			return l.Err()
//		case <-tick.C:
//			runOneRound(l.Term)  // pass the term to what the leader writes, which refuses older terms
//		}
//	}
//
// Campaign holds the leadership on a Lead stream, which the server renews while
// it is open and on which it says LOST the moment the term is no longer the
// leader's; a leader whose process dies is replaced at once (its stream ends) or,
// if the connection hangs, within its TTL. Observe follows every change of
// leadership, in order, and picks up where it stopped after a reconnect.

// DefaultElectionTTL is how long a Campaign's leadership lasts without a renewal
// when WithTTL does not say.
const DefaultElectionTTL = 10 * time.Second

// Election is one election name, on the ElectionService of a connection.
type Election struct {
	Name string

	client electionv1.ElectionServiceClient
}

// NewElection is the election name on client (a Client's Elections stub, or one
// of your own connection's).
func NewElection(client electionv1.ElectionServiceClient, name string) *Election {
	return &Election{Name: name, client: client}
}

// Election is the election name on the client's connection.
func (c *Client) Election(name string) *Election { return NewElection(c.Elections, name) }

// Leadership is this candidate's term as leader, held on a Lead stream until
// Resign. Done is closed the moment it ends.
type Leadership struct {
	Election string
	// Term strictly increases from leader to leader, across server restarts and
	// Redis data loss: pass it to what the leader writes, and have that refuse
	// older terms (like a lock's fencing token).
	Term uint64

	election *Election
	cancel   context.CancelFunc // ends the Lead stream, which resigns at once in the server
	done     chan struct{}      // closed when the leadership ends
	finished chan struct{}      // closed when the stream's reader has returned

	mu        sync.Mutex
	err       error
	expiresAt time.Time
	resigning bool
}

// Campaign waits in FIFO order among the election's candidates until this one
// leads, then returns its Leadership, which the server keeps alive until Resign.
// value is what the leader publishes (an address, a shard map; up to 64 KiB): see
// Leader, Observe and Proclaim. Options: WithTTL (how soon a leader whose
// connection hangs is replaced; default DefaultElectionTTL), WithOwner (the
// candidate's label that observers see; default the caller's address) and
// TryOnce (do not wait).
//
// It waits until ctx ends: if another candidate still leads by then, or at once
// with TryOnce, the error wraps ErrNotAcquired (and ErrElectionWaitTimeout when
// the server said so). ctx bounds only the wait, not the leadership. A server
// answering UNAVAILABLE (its Redis restarting) is campaigned with again within
// ctx, as the Retries comment describes for waiting calls.
func (e *Election) Campaign(ctx context.Context, value []byte, opts ...Option) (*Leadership, error) {
	o := collect(opts)
	ttl := o.ttl
	if ttl <= 0 {
		ttl = DefaultElectionTTL
	}
	for attempt := 0; ; {
		wait := longestWait
		if o.tryOnce {
			wait = 0
		} else if deadline, ok := ctx.Deadline(); ok {
			wait = max(0, min(wait, time.Until(deadline)-replyMargin))
		}
		l, err := e.lead(ctx, &electionv1.LeadRequest{
			Election: e.Name, Candidate: o.owner, Value: value, Ttl: durationpb.New(ttl),
			WaitTimeout: durationpb.New(wait),
		}, ttl)
		notWon := Reason(err) == ErrElectionWaitTimeout.Reason || status.Code(err) == codes.DeadlineExceeded ||
			errors.Is(ctx.Err(), context.DeadlineExceeded)
		switch {
		case err == nil:
			return l, nil
		case notWon && (o.tryOnce || wait < longestWait):
			return nil, fmt.Errorf("concord: campaign in election %q: %w: %w", e.Name, ErrNotAcquired, err)
		case notWon: // a long wait ran out and ctx has no deadline: campaign again
		case ctx.Err() == nil && !o.tryOnce && retryable(err):
			pause := backoff(attempt, rand.Int64N)
			attempt++
			if deadline, ok := ctx.Deadline(); ok && !time.Now().Add(pause).Before(deadline) {
				return nil, fmt.Errorf("concord: campaign in election %q: %w: %w", e.Name, ErrNotAcquired, err)
			}
			timer := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		default:
			return nil, fmt.Errorf("concord: campaign in election %q: %w", e.Name, err)
		}
	}
}

// lead opens one Lead stream and waits for its first message. The stream lives on
// a context of its own, so it outlasts ctx, which bounds only the wait.
func (e *Election) lead(ctx context.Context, req *electionv1.LeadRequest, ttl time.Duration) (*Leadership, error) {
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	stream, err := e.client.Lead(streamCtx, req)
	var first *electionv1.LeadResponse
	if err == nil {
		first, err = stream.Recv()
	}
	switch {
	case err == io.EOF:
		err = errors.New("the Lead stream ended before an election")
	case err == nil && first.GetEvent() != electionv1.LeadEvent_LEAD_EVENT_ELECTED:
		err = fmt.Errorf("the Lead stream began with %v, not ELECTED", first.GetEvent())
	}
	if !stop() && err == nil { // elected just as ctx ended: the cancelled stream resigns at once
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil && status.Code(err) == codes.Canceled {
			err = ctx.Err()
		}
		return nil, err
	}
	l := &Leadership{
		Election: e.Name, Term: first.GetTerm(), election: e, cancel: cancel,
		done: make(chan struct{}), finished: make(chan struct{}), expiresAt: first.GetExpiresAt().AsTime(),
	}
	go l.follow(stream, ttl)
	return l, nil
}

// follow reads the Lead stream until it ends, and ends the leadership then. No
// renewal heard for a whole TTL ends it too (the server renews every TTL/3): a
// hung connection must not leave this process believing it leads.
func (l *Leadership) follow(stream grpc.ServerStreamingClient[electionv1.LeadResponse], ttl time.Duration) {
	defer close(l.finished)
	silence := time.AfterFunc(ttl, func() {
		l.end(fmt.Errorf("%w: no renewal of term %d heard within the ttl (%v)", ErrLost, l.Term, ttl))
		l.cancel()
	})
	defer silence.Stop()
	for {
		m, err := stream.Recv()
		switch {
		case err == io.EOF:
			l.end(fmt.Errorf("%w: the Lead stream of term %d ended", ErrLost, l.Term))
			return
		case err != nil:
			l.end(fmt.Errorf("%w: %w", ErrLost, err))
			return
		case m.GetEvent() == electionv1.LeadEvent_LEAD_EVENT_LOST:
			l.end(fmt.Errorf("%w: term %d is no longer the leader's (%w)", ErrLost, l.Term, ErrNotLeader))
			l.cancel()
			return
		default:
			silence.Reset(ttl)
			l.mu.Lock()
			l.expiresAt = m.GetExpiresAt().AsTime()
			l.mu.Unlock()
		}
	}
}

// end ends the leadership once, with err unless Resign ended it.
func (l *Leadership) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return
	default:
	}
	if !l.resigning {
		l.err = err
	}
	close(l.done)
}

// Done is closed the moment the leadership ends: the server said LOST (resigned
// elsewhere, or expired while Redis was out of reach), the stream broke, no
// renewal was heard within the TTL, or Resign was called. Err then says why.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Err is nil while the leadership holds and after a Resign; once it was lost it
// wraps ErrLost (and ErrNotLeader when the server said LOST).
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ExpiresAt is when the leadership ends unless renewed, as of the last renewal
// (the Redis server's clock).
func (l *Leadership) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Proclaim replaces the value this leader publishes. The error wraps
// ErrNotLeader if the term has ended.
func (l *Leadership) Proclaim(ctx context.Context, value []byte) error {
	return l.election.Proclaim(ctx, l.Term, value)
}

// Resign ends the term and hands leadership to the next candidate, then closes
// the Lead stream: when it returns nil, the term is over. If the leadership was
// lost before, the error wraps ErrLost. Should the server not answer, the
// stream's end resigns all the same (or, if the server is gone, the TTL runs
// out), so that is no error. Calling it again does nothing.
func (l *Leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	lost, again := l.err, l.resigning
	l.resigning = true
	l.mu.Unlock()
	if again {
		<-l.finished
		return nil
	}
	// Even a leadership this process lost track of (a broken stream) may still be
	// the leader's in Redis: resigning it hands over now rather than at its TTL.
	_, err := l.election.client.Resign(ctx, &electionv1.ResignRequest{Election: l.Election, Term: l.Term})
	l.cancel()
	<-l.finished
	switch {
	case lost != nil:
		return fmt.Errorf("concord: resign election %q: %w", l.Election, lost)
	case Reason(err) == ErrNotLeader.Reason:
		return fmt.Errorf("concord: resign election %q: %w: %w", l.Election, ErrLost, err)
	}
	return nil
}

// Leader reports who leads the election now (candidate, value, term, expiry),
// or nil when nobody does.
func (e *Election) Leader(ctx context.Context) (*electionv1.Leadership, error) {
	resp, err := e.client.Leader(ctx, &electionv1.LeaderRequest{Election: e.Name})
	if err != nil {
		return nil, fmt.Errorf("concord: leader of election %q: %w", e.Name, err)
	}
	return resp.GetLeader(), nil
}

// Proclaim replaces the value of the leader of term. The error wraps
// ErrNotLeader when term is no longer the leader's.
func (e *Election) Proclaim(ctx context.Context, term uint64, value []byte) error {
	if _, err := e.client.Proclaim(ctx, &electionv1.ProclaimRequest{Election: e.Name, Term: term, Value: value}); err != nil {
		return fmt.Errorf("concord: proclaim in election %q: %w", e.Name, err)
	}
	return nil
}

// Refresh resets the TTL of term's leadership to ttl from now, and returns its
// new end (the Redis server's clock). A Leadership from Campaign needs none: its
// stream renews it. The error wraps ErrNotLeader when term is no longer the
// leader's.
func (e *Election) Refresh(ctx context.Context, term uint64, ttl time.Duration) (time.Time, error) {
	resp, err := e.client.Refresh(ctx, &electionv1.RefreshRequest{Election: e.Name, Term: term, Ttl: durationpb.New(ttl)})
	if err != nil {
		return time.Time{}, fmt.Errorf("concord: refresh election %q: %w", e.Name, err)
	}
	return resp.GetExpiresAt().AsTime(), nil
}

// Resign ends term and hands leadership to the next candidate, whichever process
// holds it (a Leadership's own Resign also closes its stream). The error wraps
// ErrNotLeader when term is no longer the leader's. It is not retried (see
// Retries): a repeat of one that took effect would report ErrNotLeader.
func (e *Election) Resign(ctx context.Context, term uint64) error {
	if _, err := e.client.Resign(ctx, &electionv1.ResignRequest{Election: e.Name, Term: term}); err != nil {
		return fmt.Errorf("concord: resign election %q: %w", e.Name, err)
	}
	return nil
}

// Change is one change of leadership as Observe reports it.
type Change struct {
	// Leader leads from this change on; nil when nobody does.
	Leader *electionv1.Leadership
	// Position is this change's place in the election's history: Observe after
	// it to resume.
	Position uint64
	// Gap: changes between the position Observe started after and this one were
	// no longer kept (the server keeps the last 1000); this is the state now.
	Gap bool
}

// Observe reports the leader now (after 0), or the changes after position after
// (from an earlier Change), then every change as it happens, in order: a new
// leader, a proclaimed value, nobody leading.
//
//	for change, err := range election.Observe(ctx, 0) {
//		if err != nil {
//			return err
//		}
//		log.Println(change.Leader.GetCandidate(), change.Leader.GetValue())
//	}
//
// When the stream fails with UNAVAILABLE (the server restarted, Redis was out,
// the connection dropped) it is reopened after the last change handed out, with
// backoff, so none is missed that the server still keeps; Gap says when some
// were not. It ends with a last error when ctx ends (wrapping ctx.Err()) or the
// server refuses (INVALID_ARGUMENT...), and with no error if the server ends the
// stream. Breaking out of the loop closes the stream.
func (e *Election) Observe(ctx context.Context, after uint64) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		position, attempt := after, 0
		for {
			stream, err := e.client.Observe(ctx, &electionv1.ObserveRequest{Election: e.Name, After: position})
			for err == nil {
				var m *electionv1.ObserveResponse
				if m, err = stream.Recv(); err == nil {
					attempt, position = 0, m.GetPosition()
					if !yield(Change{Leader: m.GetLeader(), Position: m.GetPosition(), Gap: m.GetGap()}, nil) {
						return
					}
				}
			}
			switch {
			case err == io.EOF:
				return
			case ctx.Err() != nil:
				yield(Change{}, fmt.Errorf("concord: observe election %q: %w", e.Name, ctx.Err()))
				return
			case status.Code(err) != codes.Unavailable:
				yield(Change{}, fmt.Errorf("concord: observe election %q: %w", e.Name, err))
				return
			}
			timer := time.NewTimer(backoff(attempt, rand.Int64N))
			attempt++
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		}
	}
}
