// A client's sessions: acquire, release and refresh of its locks, semaphores and
// read-write locks go as messages on one Session stream per service (LockService,
// SemaphoreService, ReadWriteLockService.Session) instead of one call each.
//
// A message on an open stream costs both ends far less than a call, and a handoff
// is two of them, so a lock passes between clients sooner this way (bench/
// scenarios/handoff.py measures it). The semantics are the async Python client's
// (clients/python/concord/_session.py):
//
// - The stream opens with the first request, and again with the first request
//   after it ended. Every request has an id of its own.
// - An answer is what the unary method would return; an answer's Error becomes the
//   ConcordError the unary call would have failed with (same code, reason,
//   metadata and message). A stream that breaks fails every request in flight on
//   it as a call would have failed (ConcordError.from its status: UNAVAILABLE when
//   the server goes away); one that ends cleanly fails them UNAVAILABLE.
// - A request whose caller stops waiting (its AbortSignal aborts, or its deadline
//   passes) is forgotten. If it was an Acquire, the server is told to give it up
//   (`cancel`), and a grant that beat the cancel is released at once, so an
//   abandoned wait never leaves the lock held.
// - The Node client retries no unary call, so no session request is retried either.
//
// Node-specific: an open stream keeps the process alive, so a session with nothing
// in flight for IDLE_MS ends its stream (half-close; leases belong to the client,
// not to the stream, so nothing is lost) and the next request opens another. A
// script that forgets client.close() exits after that instead of never.
// client.close() cancels the streams: requests in flight fail CANCELLED.
import grpc from '@grpc/grpc-js';
import { ConcordError } from './index.js';

/** How long a session with nothing in flight keeps its stream open. */
export const IDLE_MS = 2000;

const OPS = ['acquire', 'release', 'refresh'];

function abortError(signal) {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

// The ConcordError a unary call would fail with, from a session answer's concord.error.v1.Error.
function answerError(error, service) {
  const code = typeof error.code === 'number' ? error.code
    : (grpc.status[String(error.code).replace(/^CODE_/, '')] ?? grpc.status.UNKNOWN);
  const details = error.message ?? '';
  const status = Object.entries(grpc.status).find(([, c]) => c === code)?.[0] ?? String(code);
  const label = error.reason ? `${error.reason} (${status})` : status;
  return new ConcordError(`${label}: ${details}`, {
    code, reason: error.reason ?? '', metadata: error.reason ? { ...(error.metadata ?? {}) } : {}, details,
  });
}

function deadlineError(op, service, ms) {
  const details = `Deadline exceeded: no answer to the ${service} ${op} in its session within ${(ms / 1000).toFixed(3)}s`;
  return new ConcordError(`DEADLINE_EXCEEDED: ${details}`, { code: grpc.status.DEADLINE_EXCEEDED, details });
}

function endedError(service) {
  const details = `the ${service} session ended`;
  return new ConcordError(`UNAVAILABLE: ${details}`, { code: grpc.status.UNAVAILABLE, details });
}

function closedError(service) {
  const details = `the client was closed (${service} session)`;
  return new ConcordError(`CANCELLED: ${details}`, { code: grpc.status.CANCELLED, details });
}

// Milliseconds until a grpc-js deadline (a Date, or ms since the epoch); Infinity for none.
function remainingMs(deadline) {
  if (deadline === undefined || deadline === null) return Infinity;
  const at = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  return Number.isFinite(at) ? at - Date.now() : Infinity;
}

// The Release of what an Acquire answer granted: a lease (locks, read-write locks) or a permit (semaphores).
function releaseOf(acquire, granted) {
  return granted.permitId ? { name: acquire.name, permitId: granted.permitId }
    : { name: acquire.name, lease: granted.lease };
}

// One open Session call and the requests waiting for its answers.
class Stream {
  constructor(call, service, onIdle) {
    this.call = call;
    this.service = service;
    this.waiting = new Map(); // id (string) -> deliver(answer | ConcordError)
    this.ended = false; // no request may be sent on it any more
    this.finished = false; // its waiters were answered or failed
    this.error = undefined;
    this.onIdle = onIdle;
    this.lastUsed = Date.now(); // the last request sent or answer read
    this.idleTimer = undefined;
    this.armIdle(IDLE_MS);
    call.on('data', (answer) => {
      const id = String(answer.id);
      const deliver = this.waiting.get(id);
      if (deliver === undefined) return;
      this.waiting.delete(id);
      this.lastUsed = Date.now();
      deliver(answer);
    });
    call.on('error', (err) => { this.error ??= ConcordError.from(err); });
    call.on('end', () => this.finish());
    call.on('close', () => this.finish());
    call.on('status', () => setImmediate(() => this.finish())); // after any answers still buffered
  }

  finish(error) {
    if (error) this.error ??= error;
    this.ended = true;
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.idleTimer);
    const failure = this.error ?? endedError(this.service);
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const deliver of waiting) deliver(failure);
  }

  // Sends one SessionRequest; false if the stream has ended (its waiters are failed by finish()).
  send(request) {
    if (this.ended) return false;
    this.lastUsed = Date.now();
    try {
      this.call.write(request);
      return true;
    } catch (err) {
      this.error ??= ConcordError.from(err);
      this.ended = true;
      setImmediate(() => this.finish());
      return false;
    }
  }

  // Ends the stream once nothing has been in flight for IDLE_MS (checked every so often, not per message).
  armIdle(ms) {
    this.idleTimer = setTimeout(() => {
      if (this.ended) return;
      const idleFor = Date.now() - this.lastUsed;
      if (this.waiting.size > 0 || idleFor < IDLE_MS) {
        this.armIdle(this.waiting.size > 0 ? IDLE_MS : IDLE_MS - idleFor);
        return;
      }
      this.ended = true; // the next request opens another stream
      this.onIdle(this);
      try {
        this.call.end();
      } catch {
        // already ending
      }
    }, ms);
    this.idleTimer.unref?.();
  }

  cancel(error) {
    this.ended = true;
    this.error ??= error;
    try {
      this.call.cancel();
    } catch {
      // already ended
    }
    this.finish();
  }
}

/** One service's session: `request('acquire' | 'release' | 'refresh', message,
 * options)` sends the request over the service's Session stream and resolves with
 * its answer (the unary method's response) or rejects with its ConcordError.
 * `stub` is the service's grpc-js client; `service` names it in messages. */
export class Session {
  #stub;
  #service;
  #stream = null;
  #nextId = 1;

  constructor(stub, service = 'lock') {
    this.#stub = stub;
    this.#service = service;
  }

  #open() {
    if (this.#stream === null || this.#stream.ended) {
      const call = this.#stub.Session(); // after close(), throws as a unary call would
      this.#stream = new Stream(call, this.#service, (idle) => {
        if (this.#stream === idle) this.#stream = null;
      });
    }
    return this.#stream;
  }

  /** The answer to one request (op: acquire, release, refresh), or its error.
   * options: `deadline` (a Date or ms since the epoch, as grpc-js takes it) and
   * `signal` (an AbortSignal); other grpc-js call options are ignored. */
  request(op, message, { deadline, signal } = {}) {
    if (!OPS.includes(op)) return Promise.reject(new TypeError(`concord: no session op ${op}`));
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const ms = remainingMs(deadline);
      if (ms <= 0) {
        reject(deadlineError(op, this.#service, 0));
        return;
      }
      let stream;
      try {
        stream = this.#open();
      } catch (err) {
        reject(err);
        return;
      }
      const id = String(this.#nextId++);
      let timer;
      let settled = false;
      const onAbort = () => giveUp(abortError(signal));
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const giveUp = (error) => {
        if (settled) return;
        settle();
        this.#abandon(stream, id, op === 'acquire' ? message : undefined);
        reject(error);
      };
      stream.waiting.set(id, (answer) => {
        if (settled) return;
        settle();
        if (answer instanceof Error) reject(answer);
        else if (answer.result === 'error' || (answer.error && !answer[op])) reject(answerError(answer.error, this.#service));
        else resolve(answer[op]);
      });
      if (Number.isFinite(ms)) {
        timer = setTimeout(() => giveUp(deadlineError(op, this.#service, ms)), Math.min(ms, 2 ** 31 - 1));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      stream.send({ id, [op]: message }); // if the stream has ended, finish() fails the request
    });
  }

  // Nobody waits for this answer any more. An Acquire that was sent is given up in
  // the server, and a grant that beat the cancel is released at once.
  #abandon(stream, id, acquire) {
    if (acquire === undefined || stream.ended) {
      stream.waiting.delete(id);
      return;
    }
    stream.waiting.set(id, (answer) => {
      if (answer instanceof Error || answer.result !== 'acquire' || !answer.acquire?.acquired) return;
      this.request('release', releaseOf(acquire, answer.acquire)).catch(() => {}); // lost anyway if it fails
    });
    stream.send({ id: String(this.#nextId++), cancel: id });
  }

  /** Cancels the stream: requests in flight fail CANCELLED. Client.close() calls it. */
  close() {
    const stream = this.#stream;
    this.#stream = null;
    stream?.cancel(closedError(this.#service));
  }
}

/** `methods` (a service's promising methods, as Client builds them) with acquire,
 * release and refresh (and Acquire, Release, Refresh) sent over `session`. */
export function sessionMethods(methods, session) {
  const out = { ...methods };
  for (const op of OPS) {
    const method = (request, options) => session.request(op, request, options);
    out[op] = method;
    out[op[0].toUpperCase() + op.slice(1)] = method;
  }
  return out;
}
