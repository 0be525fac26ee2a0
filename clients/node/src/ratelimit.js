// Rate limits (concord.ratelimit.v1.RateLimitService): one key with the limit its
// calls carry, decided alike by every server on the Redis clock.
//
//   const api = client.ratelimit('api', { rate: 100, per: 1000, burst: 20 });   // GCRA, 100 a second
//   const d = await api.check();            // now: d.allowed, d.remaining, d.retryAfterMs
//   await api.wait(1, { timeout: 5000 });   // blocks in the server, FIFO among the key's waiters
//
// Without `rate` the key's stored limit (client.ratelimit.setLimit) decides.
import { duration } from './index.js';

// A wait with no timeout waits in server-side waits this long, re-joining the queue after each.
const LONGEST_WAIT_MS = 5 * 60_000;
// Leaves the server time to answer "not allowed" before the call's own deadline.
const REPLY_MARGIN_MS = 100;

const ms = (d) => (d ? Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6) : 0);

// A CheckResponse or WaitResponse as a plain decision, durations in ms (retryAfterMs
// -1: the hits exceed what ever passes at once; 0 when allowed).
function decision(r) {
  return {
    allowed: r.allowed,
    remaining: Number(r.remaining),
    limit: Number(r.limit),
    burst: Number(r.burst),
    resetAfterMs: ms(r.resetAfter),
    retryAfterMs: r.allowed ? 0 : (r.retryAfter ? ms(r.retryAfter) : -1),
    permit: r.permit,
  };
}

/** One key of the rate limit service: `client.ratelimit(key, { rate, per, burst, algorithm })`. */
export class RateLimit {
  #rpc;

  /** `rate` units per `per` ms, `burst` at once from idle (default: rate), by
   * `algorithm` (default GCRA: 'ALGORITHM_TOKEN_BUCKET', ... as the proto names
   * them). Without `rate` the key's stored limit decides. */
  constructor(rpc, key, { rate, per = 1000, burst = 0, algorithm } = {}) {
    this.#rpc = rpc;
    this.key = key;
    this.limit = rate ? { rate, period: duration(per), burst, ...(algorithm ? { algorithm } : {}) } : undefined;
  }

  /** Takes `hits` units now if they pass (0 peeks); resolves with the decision. */
  async check(hits = 1, { deadline = Date.now() + 10_000 } = {}) {
    return decision(await this.#rpc.check({ key: this.key, limit: this.limit, hits }, { deadline }));
  }

  /** Takes `hits` units once the limit lets them pass, waiting in the server behind
   * the key's earlier waiters (woken when the limit allows, no polling). `timeout`
   * (ms) bounds the wait: undefined waits for ever, 0 tries once. Resolves with the
   * decision; not allowed in time, `allowed` is false and nothing was taken. */
  async wait(hits = 1, { timeout } = {}) {
    const end = timeout === undefined ? Infinity : Date.now() + timeout;
    for (;;) {
      const left = end - Date.now();
      const wait = Math.max(0, Math.min(LONGEST_WAIT_MS, left - REPLY_MARGIN_MS));
      const deadline = Date.now() + wait + 10_000;
      const r = decision(await this.#rpc.wait({ key: this.key, limit: this.limit, hits,
        waitTimeout: duration(wait) }, { deadline }));
      if (r.allowed || r.retryAfterMs < 0 || wait < LONGEST_WAIT_MS) return r;
    }
  }
}

/** `client.ratelimit`: called with a key, a RateLimit; its properties are the service's methods. */
export function rateLimitClient(rpc) {
  return Object.assign((key, options) => new RateLimit(rpc, key, options), rpc);
}
