package concord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"go.concord.dev/concord"
	electionv1 "go.concord.dev/concord/gen/concord/election/v1"
)

// candidates is how many candidates wait in the election.
func candidates(t *testing.T, c *concord.Client, name string) uint32 {
	t.Helper()
	r, err := c.Elections.Leader(within(t, 5*time.Second), &electionv1.LeaderRequest{Election: name})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetCandidates()
}

func TestElectionCampaignLeaderAndResign(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	e := c.Election(name)
	l, err := e.Campaign(ctx, []byte("10.0.0.1:80"), concord.WithOwner("alice"), concord.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.Term == 0 || l.Election != name || !l.ExpiresAt().After(time.Now().Add(-time.Minute)) {
		t.Fatalf("a leadership with term %d of %q expiring %v", l.Term, l.Election, l.ExpiresAt())
	}
	leader, err := e.Leader(ctx)
	if err != nil || leader.GetCandidate() != "alice" || string(leader.GetValue()) != "10.0.0.1:80" ||
		leader.GetTerm() != l.Term {
		t.Fatalf("Leader: want alice, 10.0.0.1:80, term %d; got %v, %v", l.Term, leader, err)
	}

	// Another candidate is not elected while alice leads: at once with TryOnce, or by its ctx's deadline.
	if _, err := e.Campaign(ctx, []byte("x"), concord.WithOwner("bob"), concord.TryOnce()); !errors.Is(err, concord.ErrNotAcquired) ||
		!errors.Is(err, concord.ErrElectionWaitTimeout) {
		t.Fatalf("TryOnce while alice leads: want ErrNotAcquired and ErrElectionWaitTimeout, got %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := e.Campaign(short, nil, concord.WithOwner("bob")); !errors.Is(err, concord.ErrNotAcquired) {
		t.Fatalf("a campaign until a deadline while alice leads: want ErrNotAcquired, got %v", err)
	} else if waited := time.Since(start); waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("a campaign with 500ms to wait returned after %v", waited)
	}

	if err := l.Proclaim(ctx, []byte("10.0.0.1:81")); err != nil {
		t.Fatal(err)
	}
	if leader, err := e.Leader(ctx); err != nil || string(leader.GetValue()) != "10.0.0.1:81" {
		t.Fatalf("after Proclaim: %v, %v", leader, err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is still open after Resign")
	}
	if l.Err() != nil {
		t.Fatalf("a resigned leadership reports %v", l.Err())
	}
	if leader, err := e.Leader(ctx); err != nil || leader != nil {
		t.Fatalf("once Resign returns nobody leads; got %v, %v", leader, err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatalf("a second Resign: %v", err)
	}

	// The ended term is refused with NOT_LEADER, and the next one is greater.
	err = e.Resign(ctx, l.Term)
	var cerr *concord.Error
	if !errors.Is(err, concord.ErrNotLeader) || !errors.As(err, &cerr) || cerr.Code != codes.FailedPrecondition ||
		cerr.Reason != "NOT_LEADER" || cerr.Metadata["election"] != name {
		t.Fatalf("Resign of an ended term: want ErrNotLeader (FAILED_PRECONDITION), got %#v", err)
	}
	if err := e.Proclaim(ctx, l.Term, []byte("y")); !errors.Is(err, concord.ErrNotLeader) {
		t.Fatalf("Proclaim of an ended term: want ErrNotLeader, got %v", err)
	}
	if _, err := e.Refresh(ctx, l.Term, time.Second); !errors.Is(err, concord.ErrNotLeader) {
		t.Fatalf("Refresh of an ended term: want ErrNotLeader, got %v", err)
	}
	again, err := e.Campaign(ctx, nil, concord.TryOnce())
	if err != nil || again.Term <= l.Term {
		t.Fatalf("the next leadership: want a term above %d, got %v, %v", l.Term, again, err)
	}
	if err := again.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionHandsOverInFIFOOrder(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 30*time.Second)
	e := c.Election(name)
	first, err := e.Campaign(ctx, []byte("first"), concord.WithOwner("first"), concord.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type won struct {
		who string
		l   *concord.Leadership
	}
	elected := make(chan won, 2)
	for i, who := range []string{"c0", "c1"} {
		go func() {
			l, err := e.Campaign(ctx, []byte(who), concord.WithOwner(who), concord.WithTTL(30*time.Second))
			if err != nil {
				t.Errorf("%s: %v", who, err)
			}
			elected <- won{who, l}
		}()
		eventually(t, who+" to queue", func() bool { return candidates(t, c, name) == uint32(i+1) })
	}
	next := func(want string, after uint64) *concord.Leadership {
		t.Helper()
		select {
		case w := <-elected:
			if w.l == nil || w.who != want || w.l.Term <= after {
				t.Fatalf("want %s elected with a term above %d, got %s (%v)", want, after, w.who, w.l)
			}
			if leader, err := e.Leader(ctx); err != nil || leader.GetCandidate() != want || leader.GetTerm() != w.l.Term {
				t.Fatalf("Leader after %s was elected: %v, %v", want, leader, err)
			}
			return w.l
		case <-time.After(10 * time.Second): // far less than the 30 s TTL: the hand-over is at once
			t.Fatalf("%s was not elected", want)
		}
		return nil
	}
	select {
	case w := <-elected:
		t.Fatalf("%s was elected while first led", w.who)
	case <-time.After(200 * time.Millisecond):
	}
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	c0 := next("c0", first.Term)
	if n := candidates(t, c, name); n != 1 {
		t.Fatalf("c1 should still wait; %d candidates wait", n)
	}
	if err := c0.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	c1 := next("c1", c0.Term)
	if err := c1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestElectionObserveSeesEveryChangeInOrder(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 30*time.Second)
	e := c.Election(name)
	observing, stop := context.WithCancel(ctx)
	defer stop()
	changes := make(chan concord.Change, 16)
	go func() {
		defer close(changes)
		for change, err := range e.Observe(observing, 0) {
			if err != nil {
				if observing.Err() == nil || !errors.Is(err, context.Canceled) {
					t.Errorf("Observe: %v", err)
				}
				return
			}
			changes <- change
		}
	}()
	next := func(what string) concord.Change {
		t.Helper()
		select {
		case change, ok := <-changes:
			if !ok {
				t.Fatalf("Observe ended before %s", what)
			}
			return change
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
		return concord.Change{}
	}
	if now := next("the state now"); now.Leader != nil || now.Gap {
		t.Fatalf("the state now of a new election: %+v", now)
	}

	l, err := e.Campaign(ctx, []byte("a1"), concord.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Proclaim(ctx, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	seen := []concord.Change{next("elected"), next("proclaimed"), next("nobody leads")}
	type leader struct {
		candidate, value string
		term             uint64
	}
	for i, want := range []*leader{{"a", "a1", l.Term}, {"a", "a2", l.Term}, nil} {
		got := seen[i]
		if got.Gap || (i > 0 && got.Position <= seen[i-1].Position) {
			t.Fatalf("change %d: %+v after %+v", i, got, seen[max(0, i-1)])
		}
		if want == nil {
			if got.Leader != nil {
				t.Fatalf("change %d: want nobody leading, got %v", i, got.Leader)
			}
		} else if g := got.Leader; g == nil || g.GetCandidate() != want.candidate || string(g.GetValue()) != want.value ||
			g.GetTerm() != want.term {
			t.Fatalf("change %d: want %+v, got %v", i, *want, g)
		}
	}
	stop()

	// Observing after the first change gives exactly the ones after it.
	var resumed []uint64
	for change, err := range e.Observe(ctx, seen[0].Position) {
		if err != nil {
			t.Fatal(err)
		}
		if resumed = append(resumed, change.Position); len(resumed) == 2 {
			break
		}
	}
	if resumed[0] != seen[1].Position || resumed[1] != seen[2].Position {
		t.Fatalf("resumed after %d: got positions %v, want %d and %d", seen[0].Position, resumed,
			seen[1].Position, seen[2].Position)
	}
}

func TestElectionLeadershipLearnsAtOnceThatItWasLost(t *testing.T) {
	t.Parallel()
	c, name := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	e := c.Election(name)
	l, err := e.Campaign(ctx, []byte("v"), concord.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx, l.Term); err != nil { // as an operator, or a stale peer, could
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second): // far less than the 30 s TTL: the server says LOST at once
		t.Fatal("the leadership did not learn that it was lost")
	}
	if err := l.Err(); !errors.Is(err, concord.ErrLost) || !errors.Is(err, concord.ErrNotLeader) {
		t.Fatalf("Err of a lost leadership: want ErrLost and ErrNotLeader, got %v", err)
	}
	if err := l.Resign(ctx); !errors.Is(err, concord.ErrLost) {
		t.Fatalf("Resign of a lost leadership: want ErrLost, got %v", err)
	}
}
