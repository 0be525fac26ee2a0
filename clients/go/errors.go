package concord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	errorv1 "go.concord.dev/concord/gen/concord/error/v1"
)

var (
	// ErrNotAcquired: the lock, permits or leadership (Campaign) were not granted
	// before the context's deadline (or at once, with TryOnce). Nothing is held.
	ErrNotAcquired = errors.New("concord: not acquired in time")
	// ErrLost: a lease stopped being held before it was released, because the
	// server refused a renewal or none was confirmed before it would expire (a
	// Leadership: the server said LOST, or its stream ended). Work done under it
	// since then was not protected.
	ErrLost = errors.New("concord: lease lost")
)

// Domain is the google.rpc.ErrorInfo domain of every Concord error.
const Domain = "concord"

// Error is a failed call as the server reported it: its gRPC status code, the
// google.rpc.ErrorInfo reason ("LOCK_NOT_HELD") and metadata, and the RetryInfo
// delay when there is one. Every failed call on a Client's connection returns
// an *Error (also inside the errors of Lock, Unlock, Release...: use errors.As),
// and status.Code(err) and status.FromError(err) keep working on it.
//
// errors.Is(err, ErrLockNotHeld) tells reasons apart: there is one such
// sentinel per reason of docs/errors.md (protos/concord/error/v1/error.proto).
type Error struct {
	Code codes.Code
	// Reason is the ErrorInfo reason; "" when the server did not answer (a
	// transport failure such as a refused connection or TLS handshake).
	Reason  string
	Message string
	// Metadata is the ErrorInfo metadata, such as {"name": "orders:42"}.
	Metadata map[string]string
	// RetryDelay is the google.rpc.RetryInfo delay: when trying again may
	// succeed (RATE_LIMITED, TOO_MANY_STREAMS...); 0 when the server gave none.
	RetryDelay time.Duration

	status *status.Status
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	if e.Message == "" {
		return fmt.Sprintf("%s (%s)", e.Reason, e.Code)
	}
	return fmt.Sprintf("%s (%s): %s", e.Reason, e.Code, e.Message)
}

// GRPCStatus is the status the error came from, so status.Code and
// status.FromError see through an *Error.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil {
		return status.New(e.Code, e.Error())
	}
	return e.status
}

// Is reports whether target is an *Error (such as ErrLockNotHeld) with e's reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason != "" && t.Reason == e.Reason
}

// AsError is err as an *Error: the one err wraps, or one made from the gRPC
// status err carries (for errors from a connection that NewClient did not
// make). It is false when err is nil or carries no status.
func AsError(err error) (*Error, bool) {
	if err == nil {
		return nil, false
	}
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	e = &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == Domain {
				e.Reason, e.Metadata = d.GetReason(), d.GetMetadata()
			}
		case *errdetails.RetryInfo:
			e.RetryDelay = d.GetRetryDelay().AsDuration()
		}
	}
	return e, true
}

// Reason returns the google.rpc.ErrorInfo reason that a Concord error carries,
// such as "LOCK_NOT_HELD" or "INVALID_ARGUMENT", or "" when err has none. It
// looks through wrapped errors, so it works on the errors this package returns.
func Reason(err error) string {
	if e, ok := AsError(err); ok {
		return e.Reason
	}
	return ""
}

// refused reports whether the server said no for good (the lease is not held, or
// the task is gone), as opposed to a failure worth retrying.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.NotFound:
		return true
	}
	return false
}

// One sentinel per reason in protos/concord/error/v1/error.proto (docs/errors.md
// says what each means), for errors.Is(err, concord.ErrLockNotHeld). Each takes
// its reason and status code from the generated enum; a test fails when the enum
// has a reason without a sentinel here.
var (
	ErrInternal               = reasonError(errorv1.Reason_REASON_INTERNAL)
	ErrInvalidArgument        = reasonError(errorv1.Reason_REASON_INVALID_ARGUMENT)
	ErrNotFound               = reasonError(errorv1.Reason_REASON_NOT_FOUND)
	ErrFailedPrecondition     = reasonError(errorv1.Reason_REASON_FAILED_PRECONDITION)
	ErrAlreadyExists          = reasonError(errorv1.Reason_REASON_ALREADY_EXISTS)
	ErrPermissionDenied       = reasonError(errorv1.Reason_REASON_PERMISSION_DENIED)
	ErrResourceExhausted      = reasonError(errorv1.Reason_REASON_RESOURCE_EXHAUSTED)
	ErrUnauthenticated        = reasonError(errorv1.Reason_REASON_UNAUTHENTICATED)
	ErrRedisUnavailable       = reasonError(errorv1.Reason_REASON_REDIS_UNAVAILABLE)
	ErrDeadlineExceeded       = reasonError(errorv1.Reason_REASON_DEADLINE_EXCEEDED)
	ErrLockNotHeld            = reasonError(errorv1.Reason_REASON_LOCK_NOT_HELD)
	ErrLockWaitTimeout        = reasonError(errorv1.Reason_REASON_LOCK_WAIT_TIMEOUT)
	ErrPermitNotHeld          = reasonError(errorv1.Reason_REASON_PERMIT_NOT_HELD)
	ErrPermitsExceedLimit     = reasonError(errorv1.Reason_REASON_PERMITS_EXCEED_LIMIT)
	ErrSemaphoreWaitTimeout   = reasonError(errorv1.Reason_REASON_SEMAPHORE_WAIT_TIMEOUT)
	ErrTaskLeaseNotHeld       = reasonError(errorv1.Reason_REASON_TASK_LEASE_NOT_HELD)
	ErrTaskNotFound           = reasonError(errorv1.Reason_REASON_TASK_NOT_FOUND)
	ErrTaskLeased             = reasonError(errorv1.Reason_REASON_TASK_LEASED)
	ErrTaskFinished           = reasonError(errorv1.Reason_REASON_TASK_FINISHED)
	ErrScheduleNotFound       = reasonError(errorv1.Reason_REASON_SCHEDULE_NOT_FOUND)
	ErrScheduleExists         = reasonError(errorv1.Reason_REASON_SCHEDULE_EXISTS)
	ErrNotLeader              = reasonError(errorv1.Reason_REASON_NOT_LEADER)
	ErrElectionWaitTimeout    = reasonError(errorv1.Reason_REASON_ELECTION_WAIT_TIMEOUT)
	ErrSemaphoreLimitMismatch = reasonError(errorv1.Reason_REASON_SEMAPHORE_LIMIT_MISMATCH)
	ErrDeadlock               = reasonError(errorv1.Reason_REASON_DEADLOCK)
	ErrChatNotFound           = reasonError(errorv1.Reason_REASON_CHAT_NOT_FOUND)
	ErrChatExists             = reasonError(errorv1.Reason_REASON_CHAT_EXISTS)
	ErrNotAMember             = reasonError(errorv1.Reason_REASON_NOT_A_MEMBER)
	ErrChatFull               = reasonError(errorv1.Reason_REASON_CHAT_FULL)
	ErrNameNotFound           = reasonError(errorv1.Reason_REASON_NAME_NOT_FOUND)
	ErrFileNotFound           = reasonError(errorv1.Reason_REASON_FILE_NOT_FOUND)
	ErrFileNotComplete        = reasonError(errorv1.Reason_REASON_FILE_NOT_COMPLETE)
	ErrNotAWorker             = reasonError(errorv1.Reason_REASON_NOT_A_WORKER)
	ErrCorruptFile            = reasonError(errorv1.Reason_REASON_CORRUPT_FILE)
	ErrOffsetOutOfRange       = reasonError(errorv1.Reason_REASON_OFFSET_OUT_OF_RANGE)
	ErrLineTooLong            = reasonError(errorv1.Reason_REASON_LINE_TOO_LONG)
	ErrTooManyStreams         = reasonError(errorv1.Reason_REASON_TOO_MANY_STREAMS)
	ErrTooManyBlockedCalls    = reasonError(errorv1.Reason_REASON_TOO_MANY_BLOCKED_CALLS)
	ErrRateLimited            = reasonError(errorv1.Reason_REASON_RATE_LIMITED)
	ErrRequestTooLarge        = reasonError(errorv1.Reason_REASON_REQUEST_TOO_LARGE)
	ErrStorageFull            = reasonError(errorv1.Reason_REASON_STORAGE_FULL)
	ErrStorageQuotaExceeded   = reasonError(errorv1.Reason_REASON_STORAGE_QUOTA_EXCEEDED)
	ErrReplicationTimeout     = reasonError(errorv1.Reason_REASON_REPLICATION_TIMEOUT)
	ErrRateLimitMismatch      = reasonError(errorv1.Reason_REASON_RATE_LIMIT_MISMATCH)
	ErrRateLimitNotFound      = reasonError(errorv1.Reason_REASON_RATE_LIMIT_NOT_FOUND)
)

// sentinels holds the sentinel of each reason, by wire name.
var sentinels = map[string]*Error{}

// reasonName is r as it travels in an ErrorInfo: its enum name without "REASON_".
func reasonName(r errorv1.Reason) string { return strings.TrimPrefix(r.String(), "REASON_") }

// reasonCode is the gRPC status code error.proto's (concord.error.v1.status)
// option gives r.
func reasonCode(r errorv1.Reason) codes.Code {
	value := r.Descriptor().Values().ByNumber(r.Number())
	return codes.Code(proto.GetExtension(value.Options(), errorv1.E_Status).(errorv1.Code))
}

func reasonError(r errorv1.Reason) *Error {
	e := &Error{Code: reasonCode(r), Reason: reasonName(r)}
	sentinels[e.Reason] = e
	return e
}

// Sentinel is the sentinel of a wire reason ("LOCK_NOT_HELD" gives ErrLockNotHeld),
// or nil for a reason this package does not know.
func Sentinel(reason string) *Error { return sentinels[reason] }

// asError is what the Client's calls fail with: an *Error for a status error;
// nil, io.EOF and errors without a status unchanged.
func asError(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if e, ok := AsError(err); ok {
		return e
	}
	return err
}

// errorInterceptors turn the failures of unary calls and streams into *Error.
func errorInterceptors() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker,
		opts ...grpc.CallOption) error {
		return asError(invoker(ctx, method, req, reply, cc, opts...))
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, asError(err)
		}
		return errorStream{s}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type errorStream struct{ grpc.ClientStream }

func (s errorStream) SendMsg(m any) error { return asError(s.ClientStream.SendMsg(m)) }
func (s errorStream) RecvMsg(m any) error { return asError(s.ClientStream.RecvMsg(m)) }
