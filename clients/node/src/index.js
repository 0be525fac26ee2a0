// Concord for Node: one @grpc/grpc-js client per service, built from Concord's
// .proto files at run time by @grpc/proto-loader, so there is no generated code
// to go stale. Unary calls return promises; streaming calls are grpc-js's own
// streams. Failed calls reject (or emit 'error') with a ConcordError.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { electionClient } from './election.js';
import { rateLimitClient } from './ratelimit.js';
import { Session, sessionMethods } from './session.js';

const require = createRequire(import.meta.url);

// Where the .proto files are looked for, after the `protos` option and CONCORD_PROTOS:
// the package's own copy (`npm pack` puts protos/ in the tarball), then the
// repository's protos/ when this runs from a checkout of Concord.
const PACKAGED_PROTOS = fileURLToPath(new URL('../protos', import.meta.url));
const REPOSITORY_PROTOS = fileURLToPath(new URL('../../../protos', import.meta.url));
const MARKER = path.join('concord', 'lock', 'v1', 'lock.proto');

function holdsProtos(dir) {
  try {
    return fs.statSync(path.join(dir, MARKER)).isFile();
  } catch {
    return false;
  }
}

/** The directory of Concord's .proto files: `explicit` (the Client's `protos`
 * option), else $CONCORD_PROTOS, else the copy inside this package, else the
 * repository's protos/. Throws an Error that says what to do when none holds them. */
export function protosDir(explicit) {
  if (explicit) {
    if (holdsProtos(explicit)) return explicit;
    throw new Error(`concord: the protos option (${explicit}) is not a directory of Concord's .proto files `
      + `(no ${MARKER} in it)`);
  }
  const env = process.env.CONCORD_PROTOS;
  if (env) {
    if (holdsProtos(env)) return env;
    throw new Error(`concord: CONCORD_PROTOS=${env} is not a directory of Concord's .proto files (no ${MARKER} `
      + 'in it); point CONCORD_PROTOS at the protos/ directory of the Concord repository, or unset it to use '
      + 'the copy in this package');
  }
  for (const dir of [PACKAGED_PROTOS, REPOSITORY_PROTOS]) {
    if (holdsProtos(dir)) return dir;
  }
  throw new Error(`concord: cannot find Concord's .proto files (looked in ${PACKAGED_PROTOS} and `
    + `${REPOSITORY_PROTOS}); set CONCORD_PROTOS to the protos/ directory of the Concord repository`);
}

// The .proto files under root, as paths relative to it.
function protoFiles(root, sub = '') {
  return fs.readdirSync(path.join(root, sub), { withFileTypes: true }).flatMap((entry) => {
    const rel = path.join(sub, entry.name);
    if (entry.isDirectory()) return protoFiles(root, rel);
    return entry.name.endsWith('.proto') ? [rel] : [];
  });
}

const SERVICES = {
  lock: 'concord.lock.v1.LockService',
  semaphore: 'concord.semaphore.v1.SemaphoreService',
  queue: 'concord.queue.v1.QueueService',
  chat: 'concord.chat.v1.ChatService',
  autocomplete: 'concord.autocomplete.v1.AutocompleteService',
  files: 'concord.files.v1.FileService',
  election: 'concord.election.v1.ElectionService',
  ratelimit: 'concord.ratelimit.v1.RateLimitService',
  rwlock: 'concord.rwlock.v1.ReadWriteLockService',
};

// The services whose acquire, release and refresh go over a Session stream (session.js).
const SESSION_SERVICES = ['lock', 'semaphore', 'rwlock'];

// Field names in camelCase (fencingToken), 64-bit integers as strings (a fencing
// token does not fit a double), enums by name, and `kind` naming a oneof's field.
const LOADER_OPTIONS = { longs: String, enums: String, defaults: true, oneofs: true };

const loaded = new Map();

function loadServices(root) {
  if (!loaded.has(root)) {
    const definition = protoLoader.loadSync(protoFiles(root).map((f) => path.join(root, f)),
      { ...LOADER_OPTIONS, includeDirs: [root] });
    loaded.set(root, grpc.loadPackageDefinition(definition));
  }
  return loaded.get(root);
}

function lookup(pkg, dotted) {
  return dotted.split('.').reduce((node, part) => node[part], pkg);
}

// --- the error table (protos/concord/error/v1/error.proto) -------------------------

// error.proto imports descriptor.proto (for its `status` option), which protobufjs does not bundle by default.
const descriptorProto = require('protobufjs/google/protobuf/descriptor.json');
protobuf.common('descriptor', descriptorProto.nested.google.nested.protobuf.nested);

const tables = new Map();
const STATUS_OPTION = /^\((concord\.error\.v1\.)?status\)$/; // as protobufjs names the option

/** Every reason the server may send, with its gRPC status, read from
 * concord/error/v1/error.proto: `{ LOCK_NOT_HELD: { code: 9, status: 'FAILED_PRECONDITION' }, ... }`. */
export function reasons(protos) {
  const dir = protosDir(protos);
  if (!tables.has(dir)) {
    const root = new protobuf.Root();
    root.resolvePath = (origin, target) => (path.isAbsolute(target) ? target : path.join(dir, target));
    root.loadSync(path.join('concord', 'error', 'v1', 'error.proto'));
    const codes = root.lookupEnum('concord.error.v1.Code');
    const reasonEnum = root.lookupEnum('concord.error.v1.Reason');
    const table = {};
    for (const [name, number] of Object.entries(reasonEnum.values)) {
      if (number === 0) continue;
      const options = reasonEnum.valuesOptions?.[name] ?? {};
      const status = Object.entries(options).find(([key]) => STATUS_OPTION.test(key))?.[1];
      if (status === undefined) throw new Error(`concord: error.proto gives ${name} no status`);
      table[name.replace(/^REASON_/, '')] = Object.freeze({
        code: codes.values[status], status: status.replace(/^CODE_/, ''),
      });
    }
    tables.set(dir, Object.freeze(table));
  }
  return tables.get(dir);
}

// --- errors ----------------------------------------------------------------------

// google.rpc.Status, ErrorInfo and RetryInfo, as much of them as errors need.
const rpc = protobuf.Root.fromJSON({
  nested: {
    Any: { fields: { typeUrl: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } },
    Status: {
      fields: {
        code: { type: 'int32', id: 1 },
        message: { type: 'string', id: 2 },
        details: { rule: 'repeated', type: 'Any', id: 3 },
      },
    },
    ErrorInfo: {
      fields: {
        reason: { type: 'string', id: 1 },
        domain: { type: 'string', id: 2 },
        metadata: { keyType: 'string', type: 'string', id: 3 },
      },
    },
    Duration: { fields: { seconds: { type: 'int64', id: 1 }, nanos: { type: 'int32', id: 2 } } },
    RetryInfo: { fields: { retryDelay: { type: 'Duration', id: 1 } } },
  },
});

const STATUS_NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, code]) => [code, name]));

function statusDetails(grpcMetadata) {
  const [details] = grpcMetadata?.get?.('grpc-status-details-bin') ?? [];
  if (!details) return {};
  const found = {};
  for (const any of rpc.lookupType('Status').decode(details).details) {
    if (any.typeUrl.endsWith('/google.rpc.ErrorInfo')) {
      const { reason, domain, metadata } = rpc.lookupType('ErrorInfo').decode(any.value);
      found.info = { reason, domain, metadata: { ...metadata } };
    } else if (any.typeUrl.endsWith('/google.rpc.RetryInfo')) {
      const { retryDelay } = rpc.lookupType('RetryInfo').decode(any.value);
      if (retryDelay) {
        found.retryDelayMs = Number(retryDelay.seconds) * 1000 + Math.round((retryDelay.nanos ?? 0) / 1e6);
      }
    }
  }
  return found;
}

/** A failed call: its gRPC status `code` (grpc.status.FAILED_PRECONDITION = 9) and
 * `status` name, the server's ErrorInfo `reason` ('LOCK_NOT_HELD'; '' when the server
 * did not answer) and `metadata` ({ name: 'orders:42' }), and `retryDelayMs` from a
 * RetryInfo. `err.is('LOCK_NOT_HELD')` or `ConcordError.isReason(err, 'LOCK_NOT_HELD')`
 * tell reasons apart; docs/errors.md lists them all. */
export class ConcordError extends Error {
  constructor(message, { code = grpc.status.UNKNOWN, reason = '', metadata = {}, details = message, retryDelayMs,
    grpcMetadata, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ConcordError';
    this.code = code;
    this.status = STATUS_NAMES[code] ?? 'UNKNOWN';
    this.reason = reason;
    this.metadata = metadata;
    this.details = details;
    this.retryDelayMs = retryDelayMs;
    this.grpcMetadata = grpcMetadata;
  }

  /** err as a ConcordError: itself if it is one, else made from a grpc-js error. */
  static from(err) {
    if (err instanceof ConcordError) return err;
    const { info, retryDelayMs } = statusDetails(err?.metadata);
    const reason = info?.domain === 'concord' ? info.reason : '';
    const details = err?.details ?? String(err?.message ?? err);
    const code = typeof err?.code === 'number' ? err.code : grpc.status.UNKNOWN;
    const label = reason ? `${reason} (${STATUS_NAMES[code] ?? code})` : (STATUS_NAMES[code] ?? String(code));
    return new ConcordError(`${label}: ${details}`, {
      code, reason, metadata: reason ? info.metadata : {}, details, retryDelayMs,
      grpcMetadata: err?.metadata, cause: err,
    });
  }

  /** Whether err is a ConcordError with this reason; a reason that error.proto does not list throws. */
  static isReason(err, reason) {
    checkReason(reason);
    return err instanceof ConcordError && err.reason === reason;
  }

  /** Whether this error has this reason; a reason that error.proto does not list throws. */
  is(reason) {
    return ConcordError.isReason(this, reason);
  }
}

function checkReason(reason) {
  const table = reasons();
  if (!Object.hasOwn(table, reason)) {
    throw new TypeError(`concord: ${JSON.stringify(reason)} is not a Concord error reason; `
      + `known: ${Object.keys(table).join(', ')}`);
  }
}

/** The google.rpc.ErrorInfo ({reason, domain, metadata}) a failed call carries,
 * e.g. {reason: 'LOCK_NOT_HELD', domain: 'concord', metadata: {name: 'x'}};
 * undefined if it has none. */
export function errorInfo(err) {
  if (err instanceof ConcordError) {
    return err.reason ? { reason: err.reason, domain: 'concord', metadata: { ...err.metadata } } : undefined;
  }
  return statusDetails(err?.metadata).info;
}

// --- the client ------------------------------------------------------------------

function abortError(signal) {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

// Unary methods become promise-returning (request, callOptions) functions under
// both their proto name (Acquire) and camelCase (acquire); streams stay grpc-js
// streams. Every failure is a ConcordError.
function promising(stub) {
  const methods = {};
  for (const [name, def] of Object.entries(stub.constructor.service)) {
    const call = stub[name].bind(stub);
    let method;
    if (!def.requestStream && !def.responseStream) {
      method = (request, { signal, ...options } = {}) => new Promise((resolve, reject) => {
        if (signal?.aborted) {
          reject(abortError(signal));
          return;
        }
        const onAbort = () => pending.cancel();
        const pending = call(request, options, (err, response) => {
          signal?.removeEventListener('abort', onAbort);
          if (!err) resolve(response);
          else reject(signal?.aborted && err.code === grpc.status.CANCELLED ? abortError(signal) : ConcordError.from(err));
        });
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } else if (!def.responseStream) { // client stream: the callback gets the ConcordError
      method = (...args) => {
        const last = args.length - 1;
        if (typeof args[last] === 'function') {
          const callback = args[last];
          args[last] = (err, response) => callback(err && ConcordError.from(err), response);
        }
        return call(...args);
      };
    } else { // server or bidi stream: its 'error' event carries the ConcordError
      method = (...args) => {
        const stream = call(...args);
        const emit = stream.emit;
        stream.emit = function (event, ...rest) {
          return emit.call(this, event, ...(event === 'error' ? [ConcordError.from(rest[0])] : rest));
        };
        return stream;
      };
    }
    methods[name] = methods[def.originalName] = method;
  }
  return methods;
}

function pem(value, what) {
  if (value === undefined || value === null) return null;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return Buffer.from(value);
  try {
    return fs.readFileSync(value);
  } catch (err) {
    throw new Error(`concord: cannot read the ${what} file ${value}: ${err.message}`, { cause: err });
  }
}

function channelCredentials({ credentials, tls, ca, cert, key }) {
  if (credentials) return credentials;
  if (!tls && ca == null && cert == null && key == null) return grpc.credentials.createInsecure();
  if ((cert == null) !== (key == null)) throw new Error('concord: mutual TLS needs both cert and key');
  return grpc.credentials.createSsl(pem(ca, 'CA'), pem(key, 'key'), pem(cert, 'certificate'));
}

// Adds `authorization: Bearer <token>` to every call. An interceptor rather than
// call credentials, which grpc-js refuses on a plaintext channel.
function bearer(token) {
  return (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      metadata.set('authorization', `Bearer ${token}`);
      next(metadata, listener);
    },
  });
}

/** A connection to concord-server with `lock`, `semaphore`, `rwlock`, `queue`, `chat`,
 * `autocomplete`, `files` and `election` clients sharing one channel
 * (`client.election(name)` is an Election: campaign, observe...). Plaintext unless
 * `tls`, `ca`, `cert`/`key` (PEM Buffers or file paths) or `credentials` ask for
 * TLS; `token` sends a bearer token with every call, over TLS or plaintext.
 * acquire, release and refresh of `lock`, `semaphore` and `rwlock` go as messages
 * on one Session stream per service (session.js) unless `sessions: false`; unary
 * calls take a `signal` (AbortSignal) besides grpc-js's call options. close()
 * ends the sessions and the channel. */
export class Client {
  #channel;
  #sessions = [];

  constructor(address, options = {}) {
    const { token, channelOptions = {}, protos, sessions = true } = options;
    const pkg = loadServices(protosDir(protos));
    const credentials = channelCredentials(options);
    const interceptors = token ? [bearer(token)] : [];
    let first;
    for (const [key, service] of Object.entries(SERVICES)) {
      const Stub = lookup(pkg, service);
      const stub = first ? new Stub(address, credentials, { interceptors, channelOverride: first.getChannel() })
        : (first = new Stub(address, credentials, { ...channelOptions, interceptors }));
      this[key] = promising(stub);
      if (sessions && SESSION_SERVICES.includes(key)) {
        const session = new Session(stub, key);
        this.#sessions.push(session);
        this[key] = sessionMethods(this[key], session);
      }
    }
    this.election = electionClient(this.election); // also client.election(name): an Election
    this.ratelimit = rateLimitClient(this.ratelimit); // also client.ratelimit(key, limit): a RateLimit
    this.#channel = first.getChannel();
  }

  close() {
    for (const session of this.#sessions) session.close();
    this.#channel.close();
  }
}

/** A google.protobuf.Duration of `ms` milliseconds, e.g. `{ ttl: duration(10_000) }`. */
export function duration(ms) {
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
}

export { grpc };
export { DEFAULT_ELECTION_TTL_MS, Election, Leadership, Observer } from './election.js';
export { RateLimit } from './ratelimit.js';
export { IDLE_MS, Session } from './session.js';
