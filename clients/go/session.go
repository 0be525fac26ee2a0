package concord

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	errorv1 "go.concord.dev/concord/gen/concord/error/v1"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	rwlockv1 "go.concord.dev/concord/gen/concord/rwlock/v1"
	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

// Sessions: Acquire, Release and Refresh as messages on one Session stream.
//
// LockService, SemaphoreService and ReadWriteLockService each have a Session RPC
// that carries those three requests as messages on one long-lived stream, each
// answered by id as soon as it is done. A message on an open stream costs both
// ends far less than a unary call (no call set-up, headers or trailers), and a
// lock handoff is two of them, so a lock passes between clients sooner.
//
// LockSession, SemaphoreSession and ReadWriteLockSession are the services'
// generated client interfaces with Acquire, Release and Refresh going over such a
// stream; every other method is the wrapped stub's own unary call. So Lock,
// AcquireSemaphore and the stubs' callers work on them unchanged, and a Client's
// Locks and Semaphores are sessions. Their answers are those of the unary calls:
//
//   - an answer's Error becomes the *Error that a unary call failing with that
//     code, reason and metadata gives, so errors.Is(err, ErrLockNotHeld),
//     status.Code(err) and Reason(err) work alike;
//   - a request that fails with a retryable status is retried exactly as
//     RetryInterceptor retries its unary call (see Retries), whether or not the
//     stub's connection has that interceptor (it never sees the messages);
//   - a stream that breaks fails every request in flight on it as a call would
//     have failed, with the stream's status (UNAVAILABLE without a reason when
//     the connection drops, which is not retried: the request may have taken
//     effect);
//   - a request whose ctx ends is forgotten and fails as a call would, CANCELED
//     or DEADLINE_EXCEEDED. If it was an Acquire that was sent, the server is
//     told to give it up (cancel), and a grant that beat the cancel is released
//     at once, so an abandoned wait never leaves the lock held.
//
// The stream opens with the first request and again with the first one after it
// ended. It runs under the session's own context, not a request's, so outgoing
// metadata in a request's ctx is not sent (the connection's per-RPC credentials,
// such as WithToken's, are). A call given grpc.CallOptions goes as the unary
// call instead: per-call options cannot apply to one message on a shared stream.
// Leases belong to the client, not to the stream: they outlive it.

// sessionDriver is what differs between the three services' sessions: how to
// open the Session stream, and which Release gives back what an Acquire
// granted. Their Session messages have one shape (id; acquire, release, refresh
// or cancel; the answer or an Error), read and written through protoreflect.
type sessionDriver[Req, Resp any] struct {
	service string // the full service name: the unary methods are "/<service>/Acquire"...
	open    func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)
	// giveBack is the Release request that frees what an Acquire's answer
	// granted, or nil when it granted nothing.
	giveBack func(acquire, answer proto.Message) proto.Message
}

// session is the stream machinery, written once for the three session types: one
// stream at a time, the requests waiting for its answers, and retries.
type session[Req, Resp any] struct {
	d      sessionDriver[Req, Resp]
	ctx    context.Context // every stream's parent; Close cancels it
	cancel context.CancelFunc

	mu     sync.Mutex
	cur    *stream[Req, Resp]
	nextID uint64
	closed bool
}

// stream is one Session call and the requests waiting for its answers. Its
// waiting map and ended flag are guarded by the session's mu.
type stream[Req, Resp any] struct {
	ready   chan struct{} // closed once the call is open (call set), or failed to open (call nil)
	call    grpc.BidiStreamingClient[Req, Resp]
	sending sync.Mutex // gRPC allows one SendMsg at a time
	waiting map[uint64]func(*Resp, error)
	ended   bool
}

type answer[Resp any] struct {
	resp *Resp
	err  error
}

func newSession[Req, Resp any](d sessionDriver[Req, Resp]) *session[Req, Resp] {
	ctx, cancel := context.WithCancel(context.Background())
	return &session[Req, Resp]{d: d, ctx: ctx, cancel: cancel}
}

// close fails the requests in flight with CANCELED, and every later one.
func (s *session[Req, Resp]) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
}

// errSessionEnded fails the requests in flight on a stream that the server ended
// without answering them: they may or may not have taken effect, as after a
// lost reply.
var errSessionEnded = &Error{Code: codes.Unavailable, Message: "the session stream ended"}

// start registers a new request on the current stream, opening one if there is
// none; its answer will come on the returned channel.
func (s *session[Req, Resp]) start() (*stream[Req, Resp], uint64, chan answer[Resp], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, nil, &Error{Code: codes.Canceled, Message: "the session was closed"}
	}
	if s.cur == nil || s.cur.ended {
		s.cur = &stream[Req, Resp]{ready: make(chan struct{}), waiting: map[uint64]func(*Resp, error){}}
		go s.run(s.cur)
	}
	id := s.newID()
	answered := make(chan answer[Resp], 1)
	s.cur.waiting[id] = func(r *Resp, err error) { answered <- answer[Resp]{r, err} }
	return s.cur, id, answered, nil
}

// newID is a fresh request id; s.mu is held. Ids never repeat within a session,
// so no answer can be taken for another request's.
func (s *session[Req, Resp]) newID() uint64 {
	s.nextID++
	return s.nextID
}

// run opens st's call off the requesting goroutine (so a request can stop
// waiting for the connection when its ctx ends), then reads the answers and
// hands each to its request. When the call ends, every request still waiting
// fails with the call's error.
func (s *session[Req, Resp]) run(st *stream[Req, Resp]) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	call, err := s.d.open(ctx)
	st.call = call
	close(st.ready)
	for err == nil {
		var resp *Resp
		if resp, err = call.Recv(); err == nil {
			m := any(resp).(proto.Message).ProtoReflect()
			id := m.Get(m.Descriptor().Fields().ByName("id")).Uint()
			s.mu.Lock()
			deliver := st.waiting[id]
			delete(st.waiting, id)
			s.mu.Unlock()
			if deliver != nil {
				deliver(resp, nil)
			}
		}
	}
	if err == io.EOF {
		err = errSessionEnded
	}
	err = asError(err)
	s.mu.Lock()
	st.ended = true
	waiting := st.waiting
	st.waiting = nil
	s.mu.Unlock()
	for _, deliver := range waiting {
		deliver(nil, err)
	}
}

// send writes one request. An error means the call has ended; the reader then
// fails every request on it with the call's own error.
func (st *stream[Req, Resp]) send(r *Req) error {
	st.sending.Lock()
	defer st.sending.Unlock()
	return st.call.Send(r)
}

// request is the Session message asking op ("acquire", "release", "refresh")
// of msg, or (op "cancel") giving up the Acquire whose id is cancel.
func (s *session[Req, Resp]) request(id uint64, op protoreflect.Name, msg proto.Message, cancel uint64) *Req {
	r := new(Req)
	m := any(r).(proto.Message).ProtoReflect()
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("id"), protoreflect.ValueOfUint64(id))
	if msg != nil {
		m.Set(fields.ByName(op), protoreflect.ValueOfMessage(msg.ProtoReflect()))
	} else {
		m.Set(fields.ByName(op), protoreflect.ValueOfUint64(cancel))
	}
	return r
}

// result is an answer as the unary call would have returned it.
func result[Resp any](a answer[Resp]) (proto.Message, error) {
	if a.err != nil {
		return nil, a.err
	}
	m := any(a.resp).(proto.Message).ProtoReflect()
	field := m.WhichOneof(m.Descriptor().Oneofs().ByName("result"))
	switch {
	case field == nil:
		return nil, &Error{Code: codes.Internal, Message: "a session answer with no result"}
	case field.Name() == "error":
		return nil, errorFromAnswer(m.Get(field).Message().Interface().(*errorv1.Error))
	}
	return m.Get(field).Message().Interface(), nil
}

// once sends one request and waits for its answer, or for ctx to end.
func (s *session[Req, Resp]) once(ctx context.Context, op protoreflect.Name, msg proto.Message) (proto.Message, error) {
	st, id, answered, err := s.start()
	if err != nil {
		return nil, err
	}
	select {
	case <-st.ready:
	case <-ctx.Done():
		s.forget(st, id)
		return nil, contextError(ctx)
	}
	sent := false
	if st.call != nil { // else it failed to open, and failed every request on it
		switch err := st.send(s.request(id, op, msg, 0)); {
		case err == nil:
			sent = true
		case err != io.EOF: // refused before it was sent (too large...): the stream goes on
			s.forget(st, id)
			return nil, asError(err)
		} // io.EOF: the stream has ended, and its reader fails this request with its error
	}
	select {
	case a := <-answered:
		return result(a)
	case <-ctx.Done():
		if op == "acquire" {
			s.abandonAcquire(st, id, answered, msg, sent)
		} else {
			s.forget(st, id)
		}
		return nil, contextError(ctx)
	}
}

func (s *session[Req, Resp]) forget(st *stream[Req, Resp], id uint64) {
	s.mu.Lock()
	delete(st.waiting, id)
	s.mu.Unlock()
}

// abandonAcquire: nobody waits for this Acquire's answer any more. If it was
// sent it is given up in the server (cancel), and a grant that came first, or
// that beats the cancel, is released at once.
func (s *session[Req, Resp]) abandonAcquire(st *stream[Req, Resp], id uint64, answered chan answer[Resp],
	acquire proto.Message, sent bool) {
	giveBack := func(a answer[Resp]) {
		if granted, err := result(a); err == nil {
			if release := s.d.giveBack(acquire, granted); release != nil {
				go s.releaseQuietly(release)
			}
		} // else the stream ended or the Acquire failed: nothing is held
	}
	s.mu.Lock()
	_, waiting := st.waiting[id]
	if waiting && sent && !st.ended {
		st.waiting[id] = func(r *Resp, err error) { giveBack(answer[Resp]{r, err}) }
		cancelID := s.newID()
		s.mu.Unlock()
		// A failed send means the stream ended, which gives the Acquire up too.
		go st.send(s.request(cancelID, "cancel", nil, id)) //nolint:errcheck
		return
	}
	delete(st.waiting, id)
	s.mu.Unlock()
	select {
	case a := <-answered: // answered as ctx ended: give back what it granted
		giveBack(a)
	default: // never sent, or the stream ended: the server holds nothing for it
	}
}

// releaseQuietly frees a grant nobody waits for; if that fails, it expires.
func (s *session[Req, Resp]) releaseQuietly(release proto.Message) {
	ctx, cancel := context.WithTimeout(s.ctx, DefaultRetryBudget)
	defer cancel()
	s.do(ctx, "Release", release) //nolint:errcheck // nobody to tell
}

// do is one Acquire, Release or Refresh (method) over the session, retried as
// RetryInterceptor retries the unary call of that name.
func (s *session[Req, Resp]) do(ctx context.Context, method string, req proto.Message) (proto.Message, error) {
	op := map[string]protoreflect.Name{"Acquire": "acquire", "Release": "release", "Refresh": "refresh"}[method]
	if !repeatable("/"+s.d.service+"/"+method, req) {
		return s.once(ctx, op, req)
	}
	start := time.Now()
	wait, waits := serverWait(req)
	until := start.Add(DefaultRetryBudget)
	if waits {
		until = start.Add(wait) // as RetryInterceptor: the wait's time is spent either way
	} else if d, ok := ctx.Deadline(); ok {
		until = d
	}
	var answer proto.Message
	err := retry(ctx, until, func(attempt int) error {
		r := req
		if waits && attempt > 0 {
			r = withWait(req, max(0, wait-time.Since(start))).(proto.Message)
		}
		var err error
		answer, err = s.once(ctx, op, r)
		return err
	})
	return answer, err
}

// contextError is what a unary call whose ctx ended fails with.
func contextError(ctx context.Context) error {
	return asError(status.FromContextError(ctx.Err()).Err())
}

// errorFromAnswer is the *Error that a unary call failing with e's code, reason
// and metadata gives: the same status with the same ErrorInfo, read by AsError.
func errorFromAnswer(e *errorv1.Error) error {
	st := status.New(codes.Code(e.GetCode()), e.GetMessage())
	if e.GetReason() != "" {
		info := &errdetails.ErrorInfo{Reason: e.GetReason(), Domain: Domain, Metadata: e.GetMetadata()}
		if withInfo, err := st.WithDetails(info); err == nil {
			st = withInfo
		}
	}
	return asError(st.Err())
}

// sessionCall is one method of a session type: over the session unless the
// caller passed grpc.CallOptions, then the stub's unary call.
func sessionCall[Req, Resp any, In proto.Message, Out any](ctx context.Context, s *session[Req, Resp],
	method string, in In, opts []grpc.CallOption, unary func(context.Context, In, ...grpc.CallOption) (Out, error),
) (Out, error) {
	if len(opts) > 0 {
		return unary(ctx, in, opts...)
	}
	var zero Out
	answer, err := s.do(ctx, method, in)
	if err != nil {
		return zero, err
	}
	out, ok := answer.(Out)
	if !ok {
		return zero, &Error{Code: codes.Internal, Message: "the session answered " + method + " with another result"}
	}
	return out, nil
}

// LockSession is a LockServiceClient whose Acquire, Release and Refresh go over
// one LockService.Session stream (see Sessions). Safe for concurrent use.
type LockSession struct {
	lockv1.LockServiceClient
	s *session[lockv1.SessionRequest, lockv1.SessionResponse]
}

// NewLockSession wraps stub; the stream opens with the first request. Close
// ends it.
func NewLockSession(stub lockv1.LockServiceClient) *LockSession {
	return &LockSession{LockServiceClient: stub, s: newSession(sessionDriver[lockv1.SessionRequest, lockv1.SessionResponse]{
		service: lockv1.LockService_ServiceDesc.ServiceName,
		open: func(ctx context.Context) (grpc.BidiStreamingClient[lockv1.SessionRequest, lockv1.SessionResponse], error) {
			return stub.Session(ctx)
		},
		giveBack: func(acquire, answer proto.Message) proto.Message {
			if a := answer.(*lockv1.AcquireResponse); a.GetAcquired() {
				return &lockv1.ReleaseRequest{Name: acquire.(*lockv1.AcquireRequest).GetName(), Lease: a.GetLease()}
			}
			return nil
		},
	})}
}

func (l *LockSession) Acquire(ctx context.Context, in *lockv1.AcquireRequest,
	opts ...grpc.CallOption) (*lockv1.AcquireResponse, error) {
	return sessionCall(ctx, l.s, "Acquire", in, opts, l.LockServiceClient.Acquire)
}

func (l *LockSession) Release(ctx context.Context, in *lockv1.ReleaseRequest,
	opts ...grpc.CallOption) (*lockv1.ReleaseResponse, error) {
	return sessionCall(ctx, l.s, "Release", in, opts, l.LockServiceClient.Release)
}

func (l *LockSession) Refresh(ctx context.Context, in *lockv1.RefreshRequest,
	opts ...grpc.CallOption) (*lockv1.RefreshResponse, error) {
	return sessionCall(ctx, l.s, "Refresh", in, opts, l.LockServiceClient.Refresh)
}

// Close ends the session's stream: requests in flight and later ones fail with
// CANCELED, and the server gives up its waiting Acquires. Held locks stay held
// until released (by the unary calls) or expired.
func (l *LockSession) Close() error { l.s.close(); return nil }

// SemaphoreSession is a SemaphoreServiceClient whose Acquire, Release and
// Refresh go over one SemaphoreService.Session stream (see Sessions). Safe for
// concurrent use.
type SemaphoreSession struct {
	semaphorev1.SemaphoreServiceClient
	s *session[semaphorev1.SessionRequest, semaphorev1.SessionResponse]
}

// NewSemaphoreSession wraps stub; the stream opens with the first request.
// Close ends it.
func NewSemaphoreSession(stub semaphorev1.SemaphoreServiceClient) *SemaphoreSession {
	type req = semaphorev1.SessionRequest
	type resp = semaphorev1.SessionResponse
	return &SemaphoreSession{SemaphoreServiceClient: stub, s: newSession(sessionDriver[req, resp]{
		service: semaphorev1.SemaphoreService_ServiceDesc.ServiceName,
		open: func(ctx context.Context) (grpc.BidiStreamingClient[req, resp], error) {
			return stub.Session(ctx)
		},
		giveBack: func(acquire, answer proto.Message) proto.Message {
			if a := answer.(*semaphorev1.AcquireResponse); a.GetAcquired() {
				name := acquire.(*semaphorev1.AcquireRequest).GetName()
				return &semaphorev1.ReleaseRequest{Name: name, PermitId: a.GetPermitId()}
			}
			return nil
		},
	})}
}

func (p *SemaphoreSession) Acquire(ctx context.Context, in *semaphorev1.AcquireRequest,
	opts ...grpc.CallOption) (*semaphorev1.AcquireResponse, error) {
	return sessionCall(ctx, p.s, "Acquire", in, opts, p.SemaphoreServiceClient.Acquire)
}

func (p *SemaphoreSession) Release(ctx context.Context, in *semaphorev1.ReleaseRequest,
	opts ...grpc.CallOption) (*semaphorev1.ReleaseResponse, error) {
	return sessionCall(ctx, p.s, "Release", in, opts, p.SemaphoreServiceClient.Release)
}

func (p *SemaphoreSession) Refresh(ctx context.Context, in *semaphorev1.RefreshRequest,
	opts ...grpc.CallOption) (*semaphorev1.RefreshResponse, error) {
	return sessionCall(ctx, p.s, "Refresh", in, opts, p.SemaphoreServiceClient.Refresh)
}

// Close ends the session's stream, as LockSession.Close does.
func (p *SemaphoreSession) Close() error { p.s.close(); return nil }

// ReadWriteLockSession is a ReadWriteLockServiceClient whose Acquire, Release and
// Refresh go over one ReadWriteLockService.Session stream (see Sessions). Safe
// for concurrent use.
type ReadWriteLockSession struct {
	rwlockv1.ReadWriteLockServiceClient
	s *session[rwlockv1.SessionRequest, rwlockv1.SessionResponse]
}

// NewReadWriteLockSession wraps stub; the stream opens with the first request.
// Close ends it.
func NewReadWriteLockSession(stub rwlockv1.ReadWriteLockServiceClient) *ReadWriteLockSession {
	type req = rwlockv1.SessionRequest
	type resp = rwlockv1.SessionResponse
	return &ReadWriteLockSession{ReadWriteLockServiceClient: stub, s: newSession(sessionDriver[req, resp]{
		service: rwlockv1.ReadWriteLockService_ServiceDesc.ServiceName,
		open: func(ctx context.Context) (grpc.BidiStreamingClient[req, resp], error) {
			return stub.Session(ctx)
		},
		giveBack: func(acquire, answer proto.Message) proto.Message {
			if a := answer.(*rwlockv1.AcquireResponse); a.GetAcquired() {
				return &rwlockv1.ReleaseRequest{Name: acquire.(*rwlockv1.AcquireRequest).GetName(), Lease: a.GetLease()}
			}
			return nil
		},
	})}
}

func (w *ReadWriteLockSession) Acquire(ctx context.Context, in *rwlockv1.AcquireRequest,
	opts ...grpc.CallOption) (*rwlockv1.AcquireResponse, error) {
	return sessionCall(ctx, w.s, "Acquire", in, opts, w.ReadWriteLockServiceClient.Acquire)
}

func (w *ReadWriteLockSession) Release(ctx context.Context, in *rwlockv1.ReleaseRequest,
	opts ...grpc.CallOption) (*rwlockv1.ReleaseResponse, error) {
	return sessionCall(ctx, w.s, "Release", in, opts, w.ReadWriteLockServiceClient.Release)
}

func (w *ReadWriteLockSession) Refresh(ctx context.Context, in *rwlockv1.RefreshRequest,
	opts ...grpc.CallOption) (*rwlockv1.RefreshResponse, error) {
	return sessionCall(ctx, w.s, "Refresh", in, opts, w.ReadWriteLockServiceClient.Refresh)
}

// Close ends the session's stream, as LockSession.Close does.
func (w *ReadWriteLockSession) Close() error { w.s.close(); return nil }
