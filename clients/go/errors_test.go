package concord

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	errorv1 "go.concord.dev/concord/gen/concord/error/v1"
)

// TestErrorTable: every reason of the generated enum has its sentinel, with the
// code error.proto gives it. tests/test_error_table.py also passes the table it
// reads from error.proto itself in CONCORD_ERROR_TABLE ({"LOCK_NOT_HELD": 9, ...}),
// so stale stubs fail here too.
func TestErrorTable(t *testing.T) {
	got := map[string]int{}
	values := errorv1.Reason(0).Descriptor().Values()
	for i := range values.Len() {
		r := errorv1.Reason(values.Get(i).Number())
		if r == errorv1.Reason_REASON_UNSPECIFIED {
			continue
		}
		name := reasonName(r)
		s := Sentinel(name)
		if s == nil {
			t.Errorf("reason %s has no sentinel in errors.go", name)
			continue
		}
		if s.Code != reasonCode(r) || s.Code == codes.OK || s.Code > codes.Unauthenticated {
			t.Errorf("reason %s: sentinel code %v, error.proto says %v", name, s.Code, reasonCode(r))
		}
		got[name] = int(s.Code)
	}
	if len(sentinels) != len(got) {
		t.Errorf("%d sentinels for %d reasons", len(sentinels), len(got))
	}
	if ErrLockNotHeld.Reason != "LOCK_NOT_HELD" || ErrLockNotHeld.Code != codes.FailedPrecondition ||
		ErrRedisUnavailable.Code != codes.Unavailable {
		t.Errorf("sentinels: %v, %v", ErrLockNotHeld, ErrRedisUnavailable)
	}
	if want := os.Getenv("CONCORD_ERROR_TABLE"); want != "" {
		var table map[string]int
		if err := json.Unmarshal([]byte(want), &table); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(table) != fmt.Sprint(got) {
			t.Errorf("the Go client's table differs from error.proto's:\n go:    %v\n proto: %v", got, table)
		}
	}
}

func TestErrorFromAStatus(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "tenant request rate limit reached").WithDetails(
		&errdetails.ErrorInfo{Reason: "RATE_LIMITED", Domain: Domain, Metadata: map[string]string{"subject": "tenant"}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(250 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	wrapped := fmt.Errorf("concord: lock %q: %w", "x", asError(st.Err()))
	var e *Error
	if !errors.As(wrapped, &e) {
		t.Fatalf("not an *Error: %v", wrapped)
	}
	if e.Code != codes.ResourceExhausted || e.Reason != "RATE_LIMITED" || e.Metadata["subject"] != "tenant" ||
		e.RetryDelay != 250*time.Millisecond {
		t.Fatalf("%#v", e)
	}
	if !errors.Is(wrapped, ErrRateLimited) || errors.Is(wrapped, ErrResourceExhausted) || errors.Is(wrapped, ErrNotAcquired) {
		t.Fatal("errors.Is matches the reason, and only it")
	}
	if status.Code(wrapped) != codes.ResourceExhausted || Reason(wrapped) != "RATE_LIMITED" {
		t.Fatalf("status.Code %v, Reason %q", status.Code(wrapped), Reason(wrapped))
	}
	if got := e.Error(); got != "RATE_LIMITED (ResourceExhausted): tenant request rate limit reached" {
		t.Fatalf("Error() = %q", got)
	}
	// A transport failure has a code but no reason.
	transport := asError(status.Error(codes.Unavailable, "connection refused"))
	if Reason(transport) != "" || errors.Is(transport, ErrRedisUnavailable) || status.Code(transport) != codes.Unavailable {
		t.Fatalf("transport failure: %v", transport)
	}
	if asError(nil) != nil || Reason(errors.New("plain")) != "" {
		t.Fatal("nil and plain errors stay as they are")
	}
}

func TestClientOptionsCompose(t *testing.T) {
	pick := func(opts ...ClientOption) clientConfig {
		var c clientConfig
		for _, o := range opts {
			o(&c)
		}
		return c
	}
	// A token alone keeps the plaintext default (adding an option must not drop it).
	c := pick(WithToken("t0ken"), WithDialOptions())
	if creds, err := c.transport(); err != nil || creds.Info().SecurityProtocol != insecure.NewCredentials().Info().SecurityProtocol {
		t.Fatalf("token only: %v %v", creds, err)
	}
	if c.token != "t0ken" {
		t.Fatal("token lost")
	}
	c = pick(WithTLS(&tls.Config{ServerName: "concord.test"}), WithToken("t0ken"))
	if creds, err := c.transport(); err != nil || creds.Info().SecurityProtocol != "tls" || c.token != "t0ken" {
		t.Fatalf("TLS + token: %v %v", creds, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	c = pick(WithCAFile(missing))
	if _, err := c.transport(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing CA file: %v", err)
	}
	if _, err := NewClient("127.0.0.1:1", WithClientCertFile(missing, missing), WithToken("x")); err == nil {
		t.Fatal("a missing client certificate must fail NewClient")
	}
	client, err := NewClient("127.0.0.1:1", WithToken("x"), WithDialOptions(), WithTLS(nil))
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
}
