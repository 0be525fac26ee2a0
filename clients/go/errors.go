package concord

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrNotAcquired: the lock or permits were not granted before the context's
	// deadline (or at once, with TryOnce). Nothing is held.
	ErrNotAcquired = errors.New("concord: not acquired in time")
	// ErrLost: a lease stopped being held before it was released, because the
	// server refused a renewal or none was confirmed before it would expire.
	// Work done under it since then was not protected.
	ErrLost = errors.New("concord: lease lost")
)

// Domain is the google.rpc.ErrorInfo domain of every Concord error.
const Domain = "concord"

// Reason returns the google.rpc.ErrorInfo reason that a Concord error carries,
// such as "LOCK_NOT_HELD" or "INVALID_ARGUMENT", or "" when err has none. It
// looks through wrapped errors, so it works on the errors this package returns.
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetReason()
		}
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
