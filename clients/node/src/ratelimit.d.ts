// Types of src/ratelimit.js, written by hand; the messages are in the generated services.d.ts.
import type { concord, Services } from './services.js';

export interface RateLimitOptions {
  /** Units per `per` ms; without it the key's stored limit (setLimit) decides. */
  rate?: number;
  /** The period in ms (default 1000). */
  per?: number;
  /** Units at once from idle (GCRA, token bucket); default: rate. */
  burst?: number;
  /** The limiter, as the proto names it ('ALGORITHM_TOKEN_BUCKET'...); default GCRA. */
  algorithm?: string;
}

/** A decision, durations in ms. */
export interface Decision {
  allowed: boolean;
  remaining: number;
  limit: number;
  burst: number;
  resetAfterMs: number;
  /** How long until the hits would pass; 0 when allowed, -1 when they never pass at once. */
  retryAfterMs: number;
  /** ALGORITHM_CONCURRENCY: the permit holding the units until client.ratelimit.release. */
  permit: string;
}

/** `client.ratelimit`: called with a key, a RateLimit; its properties are the RateLimitService's methods. */
export type RateLimitClient = Services['ratelimit'] & ((key: string, options?: RateLimitOptions) => RateLimit);

/** One key of the rate limit service. */
export declare class RateLimit {
  constructor(rpc: Services['ratelimit'], key: string, options?: RateLimitOptions);
  readonly key: string;
  readonly limit: concord.ratelimit.v1.Limit | undefined;
  /** Takes `hits` (default 1) units now if they pass; 0 peeks. */
  check(hits?: number, options?: { deadline?: number }): Promise<Decision>;
  /** Takes `hits` units once they pass, waiting in the server (FIFO) up to `timeout` ms
   * (undefined: for ever, 0: try once); not allowed in time resolves with allowed false. */
  wait(hits?: number, options?: { timeout?: number }): Promise<Decision>;
}
