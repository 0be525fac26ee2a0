// Types of src/session.js, written by hand; the lock and semaphore messages are in
// the generated services.d.ts, the read-write lock's (not generated) are here.
import type * as grpc from '@grpc/grpc-js';
import type { Services } from './services.js';

/** How long (ms) a session with nothing in flight keeps its stream open. */
export declare const IDLE_MS: number;

/** The call options of a session request: its `deadline` (as grpc-js takes it) and
 * `signal`, an AbortSignal that gives the request up; other grpc-js options are ignored. */
export interface SessionCallOptions extends grpc.CallOptions {
  signal?: AbortSignal;
}

/** One service's Session stream (LockService, SemaphoreService or
 * ReadWriteLockService): requests go as messages on it and are answered by id. */
export declare class Session {
  /** `stub` is the service's grpc-js client (it has a Session method). */
  constructor(stub: grpc.Client, service?: string);
  /** The unary method's response to one request, or its ConcordError. An abandoned
   * acquire (signal aborted, deadline passed) is cancelled in the server, and a
   * grant that beat the cancel is released. */
  request<T = unknown>(op: 'acquire' | 'release' | 'refresh', message: object, options?: SessionCallOptions): Promise<T>;
  /** Cancels the stream: requests in flight fail CANCELLED. */
  close(): void;
}

type Ops = 'acquire' | 'Acquire' | 'release' | 'Release' | 'refresh' | 'Refresh';
type Method = (request: any, options?: grpc.CallOptions) => Promise<any>;

/** A service whose acquire, release and refresh go over its Session and also take a `signal`. */
export type Sessioned<S extends Record<Ops, Method>> = Omit<S, Ops> & {
  [K in Ops]: (request: Parameters<S[K]>[0], options?: SessionCallOptions) => ReturnType<S[K]>;
};

/** `methods` with acquire, release and refresh sent over `session`. */
export declare function sessionMethods<S extends Record<Ops, Method>>(methods: S, session: Session): Sessioned<S>;

export type LockClient = Sessioned<Services['lock']>;
export type SemaphoreClient = Sessioned<Services['semaphore']>;

// --- concord.rwlock.v1, by hand (services.d.ts does not cover it) -----------------

type Duration = { seconds?: number | string; nanos?: number } | null;
type Timestamp = { seconds: string; nanos: number } | null;

export type RwLockMode = 'MODE_UNSPECIFIED' | 'MODE_READ' | 'MODE_WRITE';

export interface RwLockAcquireRequest {
  name?: string;
  mode?: RwLockMode | number;
  ttl?: Duration;
  waitTimeout?: Duration;
  owner?: string;
}
export interface RwLockAcquireResponse {
  acquired: boolean;
  lease: string;
  /** A uint64, as a string. */
  fencingToken: string;
  expiresAt: Timestamp;
}
export interface RwLockReleaseRequest { name?: string; lease?: string }
export interface RwLockRefreshRequest { name?: string; lease?: string; ttl?: Duration }
export interface RwLockRefreshResponse { expiresAt: Timestamp }

/** `client.rwlock`: the ReadWriteLockService. acquire, release and refresh go over
 * its Session; describe, hold and session are its other methods (untyped here). */
export interface RwLockClient {
  acquire(request: RwLockAcquireRequest, options?: SessionCallOptions): Promise<RwLockAcquireResponse>;
  Acquire(request: RwLockAcquireRequest, options?: SessionCallOptions): Promise<RwLockAcquireResponse>;
  release(request: RwLockReleaseRequest, options?: SessionCallOptions): Promise<Record<string, never>>;
  Release(request: RwLockReleaseRequest, options?: SessionCallOptions): Promise<Record<string, never>>;
  refresh(request: RwLockRefreshRequest, options?: SessionCallOptions): Promise<RwLockRefreshResponse>;
  Refresh(request: RwLockRefreshRequest, options?: SessionCallOptions): Promise<RwLockRefreshResponse>;
  describe(request: { name?: string }, options?: grpc.CallOptions & { signal?: AbortSignal }): Promise<any>;
  Describe(request: { name?: string }, options?: grpc.CallOptions & { signal?: AbortSignal }): Promise<any>;
  hold(request: object, options?: grpc.CallOptions): grpc.ClientReadableStream<any>;
  Hold(request: object, options?: grpc.CallOptions): grpc.ClientReadableStream<any>;
  session(options?: grpc.CallOptions): grpc.ClientDuplexStream<any, any>;
  Session(options?: grpc.CallOptions): grpc.ClientDuplexStream<any, any>;
}
