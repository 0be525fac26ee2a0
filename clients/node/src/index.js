// Concord for Node: one @grpc/grpc-js client per service, built from protos/ at
// run time by @grpc/proto-loader, so there is no generated code to go stale.
// Unary calls return promises; streaming calls are grpc-js's own streams.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

// The repository's protos/; CONCORD_PROTOS points elsewhere (a copy shipped with an app).
export const PROTOS = process.env.CONCORD_PROTOS ?? fileURLToPath(new URL('../../../protos', import.meta.url));

const SERVICES = {
  lock: 'concord.lock.v1.LockService',
  semaphore: 'concord.semaphore.v1.SemaphoreService',
  queue: 'concord.queue.v1.QueueService',
  chat: 'concord.chat.v1.ChatService',
  autocomplete: 'concord.autocomplete.v1.AutocompleteService',
  files: 'concord.files.v1.FileService',
};

// Field names in camelCase (fencingToken), 64-bit integers as strings (a fencing
// token does not fit a double), enums by name, and `kind` naming a oneof's field.
const LOADER_OPTIONS = { longs: String, enums: String, defaults: true, oneofs: true };

function loadServices(root) {
  const files = fs.readdirSync(root, { recursive: true }).filter((f) => f.endsWith('.proto'));
  const definition = protoLoader.loadSync(files.map((f) => path.join(root, f)), { ...LOADER_OPTIONS, includeDirs: [root] });
  return grpc.loadPackageDefinition(definition);
}

function lookup(pkg, dotted) {
  return dotted.split('.').reduce((node, part) => node[part], pkg);
}

// Unary methods become promise-returning (request, callOptions) functions under
// both their proto name (Acquire) and camelCase (acquire); streams stay as they are.
function promising(stub) {
  const methods = {};
  for (const [name, def] of Object.entries(stub.constructor.service)) {
    const call = stub[name].bind(stub);
    methods[name] = methods[def.originalName] = def.requestStream || def.responseStream
      ? call
      : (request, options = {}) => new Promise((resolve, reject) => {
        call(request, options, (err, response) => (err ? reject(err) : resolve(response)));
      });
  }
  return methods;
}

/** A connection to concord-server with `lock`, `semaphore`, `queue`, `chat`,
 * `autocomplete` and `files` clients sharing one channel. */
export class Client {
  #channel;

  constructor(address, { credentials = grpc.credentials.createInsecure(), protos = PROTOS } = {}) {
    const pkg = loadServices(protos);
    let first;
    for (const [key, service] of Object.entries(SERVICES)) {
      const Stub = lookup(pkg, service);
      const stub = first ? new Stub(address, credentials, { channelOverride: first.getChannel() })
        : (first = new Stub(address, credentials));
      this[key] = promising(stub);
    }
    this.#channel = first.getChannel();
  }

  close() {
    this.#channel.close();
  }
}

/** A google.protobuf.Duration of `ms` milliseconds, e.g. `{ ttl: duration(10_000) }`. */
export function duration(ms) {
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
}

// google.rpc.Status and ErrorInfo, as much of them as errorInfo needs.
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
  },
});

/** The google.rpc.ErrorInfo ({reason, domain, metadata}) a failed call carries,
 * e.g. {reason: 'LOCK_NOT_HELD', domain: 'concord'}; undefined if it has none. */
export function errorInfo(err) {
  const [details] = err?.metadata?.get('grpc-status-details-bin') ?? [];
  if (!details) return undefined;
  for (const any of rpc.lookupType('Status').decode(details).details) {
    if (any.typeUrl.endsWith('/google.rpc.ErrorInfo')) {
      const { reason, domain, metadata } = rpc.lookupType('ErrorInfo').decode(any.value);
      return { reason, domain, metadata: { ...metadata } };
    }
  }
  return undefined;
}

export { grpc };
