// Command golock is the Concord Go client's side of the bench's handoff scenario
// (bench/scenarios/handoff.py): the workload handoff_clients.py runs for the
// other implementations, with the protocol of the etcd peer's program
// (bench/peers/etcd_lock/main.go), driven the way Go users drive a Concord lock:
// one grpc.ClientConn and one concord.LockSession (one LockService.Session
// stream) per process, and per client a goroutine looping on the one lock.
//
// The loop, the flags, the handshake and the report are bench/clients/lockrun's.
// Acquire and Release are the session's own (one message each way on the
// stream), not concord.Lock and Lease.Unlock: Lock starts a renewal keeper per
// acquisition (a goroutine and a timer, stopped again by Unlock), a cost per
// acquisition that the other implementations' loops do not pay; with -hold far
// below -ttl nothing needs renewing.
//
//	cd bench/clients/go_lock && go build -o golock . && ./golock -endpoint 127.0.0.1:50051 \
//	  -key bench:handoff:go -clients 0,1,2,3 -hold 0.002 -think 0.005 -wait 30 -ttl 10
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"concord.bench/lockrun"
	"go.concord.dev/concord"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
)

// callMargin is how long past its wait a call may take to be answered.
const callMargin = 10 * time.Second

// lockOf is one client's lock over the process's one session.
func lockOf(s *concord.LockSession, f lockrun.Flags) lockrun.Lock {
	acquire := &lockv1.AcquireRequest{Name: f.Key, Ttl: durationpb.New(f.TTL), WaitTimeout: durationpb.New(f.Wait)}
	return func(wait time.Duration) (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait+callMargin)
		defer cancel()
		got, err := s.Acquire(ctx, acquire)
		if err != nil || !got.GetAcquired() {
			return nil, err
		}
		return func() error {
			ctx, cancel := context.WithTimeout(context.Background(), callMargin)
			defer cancel()
			_, err := s.Release(ctx, &lockv1.ReleaseRequest{Name: f.Key, Lease: got.GetLease()})
			return err
		}, nil
	}
}

// warmUp connects and opens the lock session before the clock starts: a Refresh
// of no lease goes over the session, and LOCK_NOT_HELD (any answer of the
// server's) shows it open.
func warmUp(s *concord.LockSession, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Refresh(ctx, &lockv1.RefreshRequest{Name: key, Lease: "bench-warm-up", Ttl: durationpb.New(time.Second)})
	if err != nil && concord.Reason(err) == "" {
		return err
	}
	return nil
}

func main() {
	f := lockrun.Parse("golock", "127.0.0.1:50051", "bench:handoff:concord-go")
	// Plaintext, as concord-server listens by default; errors become *concord.Error
	// in the session itself, and it retries as the Client's connection would.
	conn, err := grpc.NewClient(f.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "golock: connect:", err)
		os.Exit(1)
	}
	defer conn.Close()
	session := concord.NewLockSession(lockv1.NewLockServiceClient(conn))
	defer session.Close()
	if err := warmUp(session, f.Key); err != nil {
		fmt.Fprintln(os.Stderr, "golock: connect:", err)
		os.Exit(1)
	}
	lock := lockOf(session, f)
	lockrun.Run("golock", f, func(int) lockrun.Lock { return lock }, func() {
		// The stream may have ended while the bench got ready: reopen it now, not
		// with the first timed acquire.
		if err := warmUp(session, f.Key); err != nil {
			fmt.Fprintln(os.Stderr, "golock: warm-up:", err)
		}
	})
}
