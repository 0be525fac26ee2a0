// Package concord is a small layer over Concord's generated gRPC stubs
// (go.concord.dev/concord/gen/...): locks and semaphores that renew themselves
// until released, leader election (Client.Election), a queue worker, and typed
// errors (Error, ErrLockNotHeld...).
// Everything else is one call on a stub, reachable through the Client's fields.
// The Client's calls that are safe to repeat ride out short outages: they are
// retried while the server answers UNAVAILABLE, within the caller's wait or
// deadline (see RetryInterceptor and the Retries comment).
package concord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	autocompletev1 "go.concord.dev/concord/gen/concord/autocomplete/v1"
	chatv1 "go.concord.dev/concord/gen/concord/chat/v1"
	electionv1 "go.concord.dev/concord/gen/concord/election/v1"
	filesv1 "go.concord.dev/concord/gen/concord/files/v1"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
	ratelimitv1 "go.concord.dev/concord/gen/concord/ratelimit/v1"
	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

// Client holds one connection and a stub per Concord service. The stubs are safe
// for concurrent use, like the connection they share. Locks and Semaphores are
// sessions (a *LockSession and a *SemaphoreSession): their Acquire, Release and
// Refresh go as messages on one Session stream each, which hands a lock over
// sooner than unary calls do (see Sessions); their other methods are unary calls.
type Client struct {
	Locks        lockv1.LockServiceClient
	Semaphores   semaphorev1.SemaphoreServiceClient
	Queues       queuev1.QueueServiceClient
	Chat         chatv1.ChatServiceClient
	Autocomplete autocompletev1.AutocompleteServiceClient
	Files        filesv1.FileServiceClient
	Elections    electionv1.ElectionServiceClient
	// RateLimits: Check, CheckMany and Wait (blocks in the server, FIFO among waiters).
	RateLimits ratelimitv1.RateLimitServiceClient

	conn *grpc.ClientConn
}

// ClientOption configures NewClient. Options compose: TLS, a client certificate,
// a bearer token and extra gRPC dial options may be given together, in any order.
type ClientOption func(*clientConfig)

type clientConfig struct {
	tls               bool
	tlsConfig         *tls.Config
	caFile            string
	certFile, keyFile string
	token             string
	dial              []grpc.DialOption
}

// WithTLS connects over TLS with a copy of config; nil trusts the system's
// certificate authorities. Without WithTLS, WithCAFile or WithClientCertFile the
// connection is plaintext, which is how concord-server listens by default.
func WithTLS(config *tls.Config) ClientOption {
	return func(c *clientConfig) {
		c.tls = true
		if config != nil {
			c.tlsConfig = config.Clone()
		}
	}
}

// WithCAFile connects over TLS, trusting the certificate authorities in the PEM
// file instead of the system's (for a server certificate from a private CA).
func WithCAFile(pemFile string) ClientOption {
	return func(c *clientConfig) { c.tls, c.caFile = true, pemFile }
}

// WithClientCertFile connects over mutual TLS, presenting the PEM certificate
// and key (for a server started with --tls-client-ca).
func WithClientCertFile(certFile, keyFile string) ClientOption {
	return func(c *clientConfig) { c.tls, c.certFile, c.keyFile = true, certFile, keyFile }
}

// WithToken sends `authorization: Bearer <token>` with every call (for a server
// started with --auth-tokens), over TLS or plaintext alike: plaintext suits a
// server on localhost or behind a proxy that terminates TLS, and exposes the
// token to anyone who can watch the network otherwise.
func WithToken(token string) ClientOption {
	return func(c *clientConfig) { c.token = token }
}

// WithDialOptions adds gRPC dial options (keepalive, interceptors, a custom
// dialer...). A grpc.WithTransportCredentials among them replaces the TLS or
// plaintext choice above.
func WithDialOptions(opts ...grpc.DialOption) ClientOption {
	return func(c *clientConfig) { c.dial = append(c.dial, opts...) }
}

// bearer is the token as per-call credentials. It does not insist on TLS
// (WithToken says why), which gRPC's oauth credentials would.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

func (c *clientConfig) transport() (credentials.TransportCredentials, error) {
	if !c.tls {
		return insecure.NewCredentials(), nil
	}
	config := c.tlsConfig
	if config == nil {
		config = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", c.caFile)
		}
		config.RootCAs = pool
	}
	if c.certFile != "" || c.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		config.Certificates = append(config.Certificates[:len(config.Certificates):len(config.Certificates)], cert)
	}
	return credentials.NewTLS(config), nil
}

// NewClient connects lazily to the server at target ("127.0.0.1:50051"),
// plaintext unless an option asks for TLS:
//
//	concord.NewClient("concord.internal:50051",
//		concord.WithCAFile("ca.pem"), concord.WithClientCertFile("me.pem", "me.key"),
//		concord.WithToken(os.Getenv("CONCORD_TOKEN")))
//
// Failed calls return an *Error. The connection retries the calls that are safe
// to repeat (RetryInterceptor).
func NewClient(target string, opts ...ClientOption) (*Client, error) {
	var c clientConfig
	for _, opt := range opts {
		opt(&c)
	}
	creds, err := c.transport()
	if err != nil {
		return nil, fmt.Errorf("concord: connect to %s: %w", target, err)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	// Outermost first: errors become *Error after the retries are done with them.
	dial = append(dial, errorInterceptors()...)
	dial = append(dial, grpc.WithChainUnaryInterceptor(RetryInterceptor()))
	conn, err := grpc.NewClient(target, append(dial, c.dial...)...)
	if err != nil {
		return nil, fmt.Errorf("concord: connect to %s: %w", target, err)
	}
	return &Client{
		Locks:        NewLockSession(lockv1.NewLockServiceClient(conn)),
		Semaphores:   NewSemaphoreSession(semaphorev1.NewSemaphoreServiceClient(conn)),
		Queues:       queuev1.NewQueueServiceClient(conn),
		Chat:         chatv1.NewChatServiceClient(conn),
		Autocomplete: autocompletev1.NewAutocompleteServiceClient(conn),
		Files:        filesv1.NewFileServiceClient(conn),
		Elections:    electionv1.NewElectionServiceClient(conn),
		RateLimits:   ratelimitv1.NewRateLimitServiceClient(conn),
		conn:         conn,
	}, nil
}

// Close ends the lock and semaphore sessions and closes the connection; calls
// still running fail with Canceled.
func (c *Client) Close() error {
	for _, s := range []any{c.Locks, c.Semaphores} {
		if s, ok := s.(interface{ Close() error }); ok {
			s.Close()
		}
	}
	return c.conn.Close()
}
