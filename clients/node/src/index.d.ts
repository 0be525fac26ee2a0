// Types of src/index.js, written by hand; the messages and services are in the
// generated services.d.ts. tests/test_client_packages.py compiles an example
// against the packed package under `tsc --strict`.
import * as grpc from '@grpc/grpc-js';
import type { ElectionClient } from './election.js';
import type { RateLimitClient } from './ratelimit.js';
import type { LockClient, RwLockClient, SemaphoreClient } from './session.js';
import type { Reason, Services } from './services.js';

export type { Callback, Reason, Services } from './services.js';
export type { concord, google } from './services.js';
export { DEFAULT_ELECTION_TTL_MS, Election, Leadership, Observer } from './election.js';
export { RateLimit } from './ratelimit.js';
export type { Decision, RateLimitClient, RateLimitOptions } from './ratelimit.js';
export { IDLE_MS, Session } from './session.js';
export type {
  LockClient, RwLockAcquireRequest, RwLockAcquireResponse, RwLockClient, RwLockMode, RwLockRefreshRequest,
  RwLockRefreshResponse, RwLockReleaseRequest, SemaphoreClient, Sessioned, SessionCallOptions,
} from './session.js';
export type {
  CampaignOptions, ElectionClient, ElectionOptions, ObserveOptions, Term, Value,
} from './election.js';
export { grpc };

/** PEM data, or the path of a PEM file. */
export type Pem = Buffer | Uint8Array | string;

export interface ClientOptions {
  /** TLS, trusting the system's certificate authorities (implied by `ca`, `cert`, `key`). */
  tls?: boolean;
  /** TLS, trusting this CA instead of the system's. */
  ca?: Pem;
  /** Mutual TLS: this client certificate, with `key`. */
  cert?: Pem;
  /** The private key of `cert`. */
  key?: Pem;
  /** A bearer token, sent as `authorization: Bearer <token>` with every call, over TLS or plaintext. */
  token?: string;
  /** grpc-js channel credentials of your own, instead of `tls`, `ca`, `cert` and `key`. */
  credentials?: grpc.ChannelCredentials;
  /** grpc-js channel options (keepalive, message sizes...). */
  channelOptions?: grpc.ChannelOptions;
  /** The directory of Concord's .proto files; default $CONCORD_PROTOS, else the package's own copy. */
  protos?: string;
  /** false: lock, semaphore and rwlock acquire/release/refresh are unary calls
   * instead of messages on one Session stream per service (default true). */
  sessions?: boolean;
}

/** A connection to concord-server: one channel, a client per service (and
 * `client.election(name)`, an Election). Plaintext
 * unless `tls`, `ca`, `cert`/`key` or `credentials` ask for TLS. */
export declare class Client implements Services {
  constructor(address: string, options?: ClientOptions);
  /** acquire, release and refresh go over the LockService's Session stream (and take a `signal`). */
  lock: LockClient;
  /** acquire, release and refresh go over the SemaphoreService's Session stream (and take a `signal`). */
  semaphore: SemaphoreClient;
  /** The ReadWriteLockService; acquire, release and refresh go over its Session stream. */
  rwlock: RwLockClient;
  queue: Services['queue'];
  chat: Services['chat'];
  autocomplete: Services['autocomplete'];
  files: Services['files'];
  /** `client.ratelimit(key, { rate, per, burst })` is a RateLimit (check, wait); its
   * properties are Check, CheckMany, Wait (blocks in the server, FIFO among a key's
   * waiters), SetLimit... as for the other services. */
  ratelimit: RateLimitClient;
  /** `client.election(name)` is an Election (campaign, leader, observe...); its
   * properties are the ElectionService's methods, as for the other services. */
  election: ElectionClient;
  /** Cancels the sessions (requests in flight on them fail CANCELLED) and closes the channel. */
  close(): void;
}

export interface ConcordErrorOptions {
  code?: number;
  reason?: Reason | '';
  metadata?: Record<string, string>;
  details?: string;
  retryDelayMs?: number;
  grpcMetadata?: grpc.Metadata;
  cause?: unknown;
}

/** A failed call. Unary calls reject with one; streams emit one on 'error'. */
export declare class ConcordError extends Error {
  constructor(message: string, options?: ConcordErrorOptions);
  /** The gRPC status code: grpc.status.FAILED_PRECONDITION (9)... */
  readonly code: grpc.status;
  /** The status code's name: 'FAILED_PRECONDITION'. */
  readonly status: keyof typeof grpc.status;
  /** The server's google.rpc.ErrorInfo reason; '' when the server did not answer (no connection, TLS refused). */
  readonly reason: Reason | '';
  /** The ErrorInfo metadata, such as { name: 'orders:42' }. */
  readonly metadata: Record<string, string>;
  /** The server's message. */
  readonly details: string;
  /** From a google.rpc.RetryInfo: when trying again may succeed (RATE_LIMITED...). */
  readonly retryDelayMs?: number;
  /** The call's trailing metadata. */
  readonly grpcMetadata?: grpc.Metadata;
  /** err as a ConcordError: itself, or made from a grpc-js error. */
  static from(err: unknown): ConcordError;
  /** Whether err is a ConcordError with this reason. */
  static isReason(err: unknown, reason: Reason): err is ConcordError;
  /** Whether this error has this reason. */
  is(reason: Reason): boolean;
}

export interface ReasonInfo {
  /** The gRPC status code a call with this reason fails with. */
  readonly code: grpc.status;
  /** Its name: 'FAILED_PRECONDITION'. */
  readonly status: keyof typeof grpc.status;
}

/** Every reason, with its status, read from error.proto at run time. */
export declare function reasons(protos?: string): Readonly<Record<Reason, ReasonInfo>>;

/** The directory of Concord's .proto files that a Client would use. */
export declare function protosDir(explicit?: string): string;

/** The google.rpc.ErrorInfo a failed call carries, if any. */
export declare function errorInfo(err: unknown):
  { reason: string; domain: string; metadata: Record<string, string> } | undefined;

/** A google.protobuf.Duration of `ms` milliseconds: `{ ttl: duration(10_000) }`. */
export declare function duration(ms: number): { seconds: string; nanos: number };
