// Leader election (concord.election.v1.ElectionService): one leader per election
// name among any number of candidates, like etcd's concurrency.Election.
//
//   const election = client.election('scheduler');
//   const leadership = await election.campaign(Buffer.from('10.0.0.7:8080'));   // FIFO among candidates
//   leadership.lost.then(() => stopWork());        // LOST, the stream ended, or resign()
//   ... runOneRound(leadership.term) ...           // pass the term to what the leader writes
//   await leadership.resign();                      // the next candidate leads at once
//
//   for await (const { leader, position } of election.observe()) console.log(leader?.candidate ?? 'nobody');
//
// campaign() holds the leadership on a Lead stream, which the server renews while it
// is open and on which it says LOST the moment the term is no longer this leader's; a
// process that dies ends its stream, which resigns at once. observe() reports the
// leader now, then every change in order, and picks up after the last change it gave
// when the stream fails with UNAVAILABLE (a server restarting, Redis away).
import grpc from '@grpc/grpc-js';
import { ConcordError, duration } from './index.js';

/** How long a campaign's leadership lasts without a renewal, unless `ttl` says (ms). */
export const DEFAULT_ELECTION_TTL_MS = 10_000;
// A campaign with no timeout waits in server-side waits this long, re-joining the queue after each.
const LONGEST_WAIT_MS = 5 * 60_000;
const BACKOFF_BASE_MS = 50;
const BACKOFF_CAP_MS = 1000; // campaign retries: full jitter, as the Go and Python clients
const RESUME_CAP_MS = 2000; // observe reconnects: 50 ms doubling to 2 s

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const backoff = (attempt) => Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 20));

// The NOT_LEADER error a leadership that was lost reports, with what ended it as its cause.
function lostError(election, term, why, cause) {
  const details = `leadership of election ${JSON.stringify(election)} (term ${term}) was lost: ${why}`;
  return new ConcordError(`NOT_LEADER (FAILED_PRECONDITION): ${details}`, {
    code: grpc.status.FAILED_PRECONDITION, reason: 'NOT_LEADER', metadata: { election }, details, cause,
  });
}

function abortError(signal) {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** One election name on a Client: `client.election(name, { ttl, candidate })`. */
export class Election {
  #rpc;

  /** `rpc` is the Client's ElectionService (`client.election`); `ttl` (ms) and
   * `candidate` (a label observers see; default the caller's address) are the
   * defaults of campaign(). */
  constructor(rpc, name, { ttl = DEFAULT_ELECTION_TTL_MS, candidate = '' } = {}) {
    this.#rpc = rpc;
    this.name = name;
    this.ttl = ttl;
    this.candidate = candidate;
  }

  /** Waits in FIFO order among the candidates until this one leads, then resolves
   * with its Leadership, held on a Lead stream until leadership.resign(). `value`
   * is what the leader publishes (a Buffer, up to 64 KiB). `timeout` (ms) bounds
   * the wait: undefined waits for ever, 0 tries once; not elected in time rejects
   * with ELECTION_WAIT_TIMEOUT. `signal` (an AbortSignal) gives up the wait. A
   * server answering UNAVAILABLE is campaigned with again within the timeout. */
  async campaign(value = Buffer.alloc(0), { ttl = this.ttl, timeout, candidate = this.candidate, signal } = {}) {
    const end = timeout == null ? Infinity : Date.now() + timeout;
    for (let attempt = 0; ;) {
      signal?.throwIfAborted();
      const wait = timeout === 0 ? 0 : Math.max(0, Math.min(LONGEST_WAIT_MS, Math.floor(end - Date.now())));
      const call = this.#rpc.lead({
        election: this.name, candidate, value, ttl: duration(Math.round(ttl)), waitTimeout: duration(wait),
      });
      const abort = () => call.cancel();
      signal?.addEventListener('abort', abort, { once: true });
      try {
        return await Leadership.elected(this, call, ttl);
      } catch (err) {
        call.cancel();
        if (signal?.aborted) throw abortError(signal);
        if (err.is?.('ELECTION_WAIT_TIMEOUT') || err.code === grpc.status.DEADLINE_EXCEEDED) {
          if (timeout === 0 || wait < LONGEST_WAIT_MS) throw err;
          continue; // a long wait ran out and there is no timeout: campaign again
        }
        // Only an UNAVAILABLE the server answered (it carries a reason): a server
        // that is not there would only delay the error.
        if (err.code !== grpc.status.UNAVAILABLE || !err.reason || timeout === 0) throw err;
        const pause = backoff(attempt++);
        if (Date.now() + pause >= end) throw err;
        await sleep(pause);
      } finally {
        signal?.removeEventListener('abort', abort);
      }
    }
  }

  /** Who leads now: `{ candidate, value, term, expiresAt }`, or null when nobody does. */
  async leader(options) {
    return (await this.#rpc.leader({ election: this.name }, options)).leader;
  }

  /** Replaces the value of the leader of `term`; rejects with NOT_LEADER when the
   * term is no longer the leader's. */
  async proclaim(term, value, options) {
    await this.#rpc.proclaim({ election: this.name, term: String(term), value }, options);
  }

  /** Resets the TTL of `term`'s leadership to `ttl` ms from now (a Leadership from
   * campaign() needs none: its stream renews it); resolves with the new end. */
  async refresh(term, ttl = this.ttl, options) {
    return (await this.#rpc.refresh({ election: this.name, term: String(term), ttl: duration(Math.round(ttl)) },
      options))
      .expiresAt;
  }

  /** Ends `term` and hands leadership to the next candidate, whichever process
   * holds it; rejects with NOT_LEADER when the term is no longer the leader's. */
  async resign(term, options) {
    await this.#rpc.resign({ election: this.name, term: String(term) }, options);
  }

  /** The leader now (or, with `after`, the changes after that position), then
   * every change as it happens: `for await (const { leader, position, gap } of
   * election.observe())`. Resumes after UNAVAILABLE; close() (or leaving the loop)
   * ends it. */
  observe({ after = '0' } = {}) {
    return new Observer(this.#rpc, this.name, after);
  }
}

/** This candidate's term as leader. `lost` resolves the moment it ends. */
export class Leadership {
  #election;
  #call;
  #ttl;
  #silence;
  #ended = false;
  #resigning = false;
  #resolve;

  constructor(election, call, first, ttl) {
    this.#election = election;
    this.#call = call;
    this.#ttl = ttl;
    /** The election's name. */
    this.election = election.name;
    /** This term (a uint64, as a string): pass it to what the leader writes. */
    this.term = first.term;
    /** When the leadership ends unless renewed, as of the last renewal (Redis clock). */
    this.expiresAt = first.expiresAt;
    /** Why the leadership was lost (a NOT_LEADER ConcordError); undefined while it
     * holds and after resign(). */
    this.error = undefined;
    /** Resolves (with `error`) the moment the leadership ends: the server said LOST,
     * the stream ended, no renewal came within the TTL, or resign() was called. */
    this.lost = new Promise((resolve) => { this.#resolve = resolve; });
    this.#listen();
  }

  // Resolves with the Leadership once the stream says ELECTED; rejects with the
  // stream's error (ELECTION_WAIT_TIMEOUT...) if it ends first.
  static elected(election, call, ttl) {
    return new Promise((resolve, reject) => {
      const fail = (err) => { cleanup(); reject(err); };
      const ended = () => fail(new ConcordError('UNKNOWN: the Lead stream ended before an election'));
      const first = (m) => {
        cleanup();
        if (m.event !== 'LEAD_EVENT_ELECTED') {
          reject(new ConcordError(`UNKNOWN: the Lead stream began with ${m.event}, not LEAD_EVENT_ELECTED`));
        } else {
          resolve(new Leadership(election, call, m, ttl));
        }
      };
      const onError = (err) => fail(ConcordError.from(err));
      function cleanup() {
        call.off('data', first).off('error', onError).off('end', ended);
        call.on('error', () => {}); // a later CANCELLED must not go unheard
      }
      call.once('data', first).on('error', onError).once('end', ended);
    });
  }

  #listen() {
    const call = this.#call;
    this.#quiet();
    call.on('data', (m) => {
      if (m.event === 'LEAD_EVENT_LOST') {
        this.#end(lostError(this.election, this.term, 'the server said LOST'));
        call.cancel();
        return;
      }
      this.expiresAt = m.expiresAt;
      this.#quiet();
    });
    call.on('error', (err) => this.#end(lostError(this.election, this.term, 'the Lead stream failed', err)));
    call.on('end', () => this.#end(lostError(this.election, this.term, 'the Lead stream ended')));
  }

  // (Re)starts the wait for the next renewal: the server renews every TTL/3, so a
  // whole TTL without one means the leadership may have expired.
  #quiet() {
    clearTimeout(this.#silence);
    this.#silence = setTimeout(() => {
      this.#end(lostError(this.election, this.term, `no renewal heard within the ttl (${this.#ttl} ms)`));
      this.#call.cancel();
    }, this.#ttl);
    this.#silence.unref?.();
  }

  #end(error) {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#silence);
    if (!this.#resigning) this.error = error;
    this.#resolve(this.error);
  }

  /** Whether the leadership has ended (see `lost`). */
  get ended() {
    return this.#ended;
  }

  /** Replaces the value this leader publishes; NOT_LEADER if the term has ended. */
  proclaim(value, options) {
    return this.#election.proclaim(this.term, value, options);
  }

  /** Ends the term and hands leadership to the next candidate, then closes the
   * stream: once it resolves, the term is over. Rejects with NOT_LEADER if the
   * leadership had been lost. Should the server not answer, the stream's end
   * resigns all the same, so that is no error. A second call does nothing. */
  async resign(options) {
    if (this.#resigning) {
      await this.lost;
      return;
    }
    const lostBefore = this.error;
    this.#resigning = true;
    let refused;
    try {
      // Even a leadership this process lost track of may still lead in Redis: hand over now.
      await this.#election.resign(this.term, options);
    } catch (err) {
      if (ConcordError.isReason(err, 'NOT_LEADER')) refused = err;
    }
    this.#call.cancel();
    if (!this.#ended) this.#end(undefined);
    await this.lost;
    if (lostBefore) throw lostBefore;
    if (refused) throw lostError(this.election, this.term, 'the term had ended before resign()', refused);
  }
}

/** The changes of an election's leadership, as an async iterable that resumes
 * after UNAVAILABLE from the last position it gave. */
export class Observer {
  #rpc;
  #call = null;
  #closed = false;

  constructor(rpc, election, after = '0') {
    this.#rpc = rpc;
    this.election = election;
    /** The position of the last change handed out: observe({ after }) resumes there. */
    this.position = String(after);
  }

  /** Ends the iteration (and the stream). */
  close() {
    this.#closed = true;
    this.#call?.cancel();
  }

  async* [Symbol.asyncIterator]() {
    let pause = BACKOFF_BASE_MS;
    try {
      while (!this.#closed) {
        const call = this.#call = this.#rpc.observe({ election: this.election, after: this.position });
        call.on('error', () => {}); // failures reach the loop below; none may go unheard
        try {
          for await (const change of call) {
            pause = BACKOFF_BASE_MS;
            this.position = change.position;
            yield change;
          }
          return;
        } catch (e) {
          const err = ConcordError.from(e);
          if (this.#closed || err.code === grpc.status.CANCELLED) return;
          if (err.code !== grpc.status.UNAVAILABLE) throw err;
        }
        await sleep(pause);
        pause = Math.min(pause * 2, RESUME_CAP_MS);
      }
    } finally {
      this.#call?.cancel();
      this.#call = null;
    }
  }
}

/** `client.election`: called with a name it is an Election; its properties are the
 * ElectionService's methods (leader, Leader, lead...), as for the other services. */
export function electionClient(rpc) {
  return Object.assign((name, options) => new Election(rpc, name, options), rpc);
}
