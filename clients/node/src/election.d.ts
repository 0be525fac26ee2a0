// Types of src/election.js, written by hand; the messages are in the generated services.d.ts.
import type * as grpc from '@grpc/grpc-js';
import type { ConcordError } from './index.js';
import type { concord, google, Services } from './services.js';

/** How long a campaign's leadership lasts without a renewal, unless `ttl` says (ms). */
export declare const DEFAULT_ELECTION_TTL_MS: number;

/** A uint64 term: as the server sends it (a string), or a number or bigint. */
export type Term = string | number | bigint;

/** A leader's value: what it publishes (an address, a shard map), up to 64 KiB. */
export type Value = Buffer | Uint8Array | string;

export interface ElectionOptions {
  /** Default TTL (ms) of campaign()'s leadership: a leader whose connection hangs is replaced within it. */
  ttl?: number;
  /** Default candidate label that observers see; the server defaults to the caller's address. */
  candidate?: string;
}

export interface CampaignOptions extends ElectionOptions {
  /** How long to wait to be elected (ms): undefined waits for ever, 0 tries once.
   * Not elected in time rejects with ELECTION_WAIT_TIMEOUT. */
  timeout?: number;
  /** Gives up the wait (rejects with the signal's reason). */
  signal?: AbortSignal;
}

export interface ObserveOptions {
  /** The position of the last change already seen (a Change's `position`); '0' starts with the state now. */
  after?: Term;
}

/** `client.election`: called with a name, an Election; its properties are the ElectionService's methods. */
export type ElectionClient = Services['election'] & ((name: string, options?: ElectionOptions) => Election);

/** One election name on a Client: `client.election(name, { ttl, candidate })`. */
export declare class Election {
  constructor(rpc: Services['election'], name: string, options?: ElectionOptions);
  readonly name: string;
  ttl: number;
  candidate: string;
  /** Waits in FIFO order among the candidates until this one leads; the
   * Leadership is held on a Lead stream until its resign(). */
  campaign(value?: Value, options?: CampaignOptions): Promise<Leadership>;
  /** Who leads now, or null when nobody does. */
  leader(options?: grpc.CallOptions): Promise<concord.election.v1.Leadership__Output | null>;
  /** Replaces the value of the leader of `term`; NOT_LEADER when the term has ended. */
  proclaim(term: Term, value: Value, options?: grpc.CallOptions): Promise<void>;
  /** Resets the TTL of `term`'s leadership to `ttl` ms from now; resolves with its new end. */
  refresh(term: Term, ttl?: number, options?: grpc.CallOptions): Promise<google.protobuf.Timestamp__Output | null>;
  /** Ends `term` and hands leadership to the next candidate; NOT_LEADER when the term has ended. */
  resign(term: Term, options?: grpc.CallOptions): Promise<void>;
  /** The leader now (or the changes after `after`), then every change in order; resumes after UNAVAILABLE. */
  observe(options?: ObserveOptions): Observer;
}

/** This candidate's term as leader. */
export declare class Leadership {
  private constructor();
  /** The election's name. */
  readonly election: string;
  /** This term (a uint64, as a string): pass it to what the leader writes, which should refuse older terms. */
  readonly term: string;
  /** When the leadership ends unless renewed, as of the last renewal (Redis clock). */
  readonly expiresAt: google.protobuf.Timestamp__Output | null;
  /** Why the leadership was lost (a NOT_LEADER ConcordError); undefined while it holds and after resign(). */
  readonly error: ConcordError | undefined;
  /** Resolves (with `error`) the moment the leadership ends: the server said LOST,
   * the stream ended, no renewal came within the TTL, or resign() was called. Never rejects. */
  readonly lost: Promise<ConcordError | undefined>;
  /** Whether the leadership has ended. */
  readonly ended: boolean;
  /** Replaces the value this leader publishes; NOT_LEADER if the term has ended. */
  proclaim(value: Value, options?: grpc.CallOptions): Promise<void>;
  /** Ends the term (the next candidate leads) and closes the stream; rejects with NOT_LEADER if it had been lost. */
  resign(options?: grpc.CallOptions): Promise<void>;
}

/** An election's changes of leadership: `for await (const { leader, position, gap } of observer)`. */
export declare class Observer implements AsyncIterable<concord.election.v1.ObserveResponse__Output> {
  private constructor();
  readonly election: string;
  /** The position of the last change handed out: observe({ after: position }) resumes there. */
  readonly position: string;
  /** Ends the iteration and the stream. */
  close(): void;
  [Symbol.asyncIterator](): AsyncGenerator<concord.election.v1.ObserveResponse__Output, void, undefined>;
}
