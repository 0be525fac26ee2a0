// Package concord is a small layer over Concord's generated gRPC stubs
// (concord/clients/go/gen/...): locks and semaphores that renew themselves until
// released, and a queue worker. Everything else is one call on a stub, reachable
// through the Client's fields. The Client's calls that are safe to repeat ride out
// short outages: they are retried while the server answers UNAVAILABLE, within
// the caller's wait or deadline (see RetryInterceptor and the Retries comment).
package concord

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	autocompletev1 "concord/clients/go/gen/concord/autocomplete/v1"
	chatv1 "concord/clients/go/gen/concord/chat/v1"
	filesv1 "concord/clients/go/gen/concord/files/v1"
	lockv1 "concord/clients/go/gen/concord/lock/v1"
	queuev1 "concord/clients/go/gen/concord/queue/v1"
	semaphorev1 "concord/clients/go/gen/concord/semaphore/v1"
)

// Client holds one connection and a stub per Concord service. The stubs are safe
// for concurrent use, like the connection they share.
type Client struct {
	Locks        lockv1.LockServiceClient
	Semaphores   semaphorev1.SemaphoreServiceClient
	Queues       queuev1.QueueServiceClient
	Chat         chatv1.ChatServiceClient
	Autocomplete autocompletev1.AutocompleteServiceClient
	Files        filesv1.FileServiceClient

	conn *grpc.ClientConn
}

// NewClient connects lazily to the server at target ("127.0.0.1:50051"). Without
// options the connection is plaintext, which is how concord-server listens; pass
// grpc.WithTransportCredentials (and any other option) to change that. The
// connection retries the calls that are safe to repeat (RetryInterceptor).
func NewClient(target string, opts ...grpc.DialOption) (*Client, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts[:len(opts):len(opts)], grpc.WithChainUnaryInterceptor(RetryInterceptor())) // not the caller's array
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("concord: connect to %s: %w", target, err)
	}
	return &Client{
		Locks:        lockv1.NewLockServiceClient(conn),
		Semaphores:   semaphorev1.NewSemaphoreServiceClient(conn),
		Queues:       queuev1.NewQueueServiceClient(conn),
		Chat:         chatv1.NewChatServiceClient(conn),
		Autocomplete: autocompletev1.NewAutocompleteServiceClient(conn),
		Files:        filesv1.NewFileServiceClient(conn),
		conn:         conn,
	}, nil
}

// Close closes the connection; calls still running fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }
