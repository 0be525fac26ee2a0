// Command roundtrip takes and releases a lock, then puts a task through a queue
// (enqueue, dequeue, ack), printing what it sees. Its connection comes from the
// environment: CONCORD_ADDR (default 127.0.0.1:50051); CONCORD_CA, CONCORD_CERT and
// CONCORD_KEY (PEM files: TLS, mutual TLS) and CONCORD_TOKEN (a bearer token), each
// only when set:
//
//	CONCORD_ADDR=127.0.0.1:50051 go run ./examples/roundtrip
//
// tests/test_client_packages.py builds it in a module of its own, outside this
// one, the way an application that requires go.concord.dev/concord would.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"go.concord.dev/concord"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	addr := os.Getenv("CONCORD_ADDR")
	if addr == "" {
		addr = "127.0.0.1:50051"
	}
	var opts []concord.ClientOption
	if ca := os.Getenv("CONCORD_CA"); ca != "" {
		opts = append(opts, concord.WithCAFile(ca))
	}
	if cert, key := os.Getenv("CONCORD_CERT"), os.Getenv("CONCORD_KEY"); cert != "" {
		opts = append(opts, concord.WithClientCertFile(cert, key))
	}
	if token := os.Getenv("CONCORD_TOKEN"); token != "" {
		opts = append(opts, concord.WithToken(token))
	}
	client, err := concord.NewClient(addr, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b := make([]byte, 8)
	rand.Read(b)
	name := "go-example:" + hex.EncodeToString(b)

	// A lock: taken (renewed in the background meanwhile), released; a release
	// with the same lease after that is refused with LOCK_NOT_HELD.
	lease, err := concord.Lock(ctx, client.Locks, name, 10*time.Second, concord.WithOwner("go"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lock", name, lease.FencingToken)
	if err := lease.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = client.Locks.Release(ctx, &lockv1.ReleaseRequest{Name: name, Lease: lease.ID})
	var cerr *concord.Error
	if !errors.Is(err, concord.ErrLockNotHeld) || !errors.As(err, &cerr) || cerr.Metadata["name"] != name {
		log.Fatalf("a second release: want LOCK_NOT_HELD, got %v", err)
	}
	fmt.Println("release again", cerr.Code, cerr.Reason)

	// A queue: a task enqueued, dequeued with its payload, acked.
	payload := []byte(`{"to": "ada@example.com"}`)
	enq, err := client.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{
		Queue: name, Tasks: []*queuev1.NewTask{{Type: "send_welcome", Payload: payload}}})
	if err != nil {
		log.Fatal(err)
	}
	deq, err := client.Queues.Dequeue(ctx, &queuev1.DequeueRequest{
		Queues: []string{name}, MaxTasks: 1, WaitTimeout: durationpb.New(5 * time.Second)})
	if err != nil {
		log.Fatal(err)
	}
	if len(deq.GetTasks()) != 1 || deq.GetTasks()[0].GetTaskId() != enq.GetResults()[0].GetTaskId() ||
		string(deq.GetTasks()[0].GetPayload()) != string(payload) {
		log.Fatalf("dequeued %v", deq.GetTasks())
	}
	task := deq.GetTasks()[0]
	if _, err := client.Queues.Ack(ctx, &queuev1.AckRequest{Queue: name, TaskId: task.GetTaskId(), Lease: task.GetLease()}); err != nil {
		log.Fatal(err)
	}
	stats, err := client.Queues.Stats(ctx, &queuev1.StatsRequest{Queue: name})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("queue", task.GetType(), stats.GetReady(), stats.GetLeased())
}
