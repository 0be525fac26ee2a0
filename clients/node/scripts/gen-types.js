// Writes src/services.d.ts: TypeScript types for every Concord message, service
// and error reason, read from the .proto files (those src/index.js loads), in the
// shapes the Client gives and takes (camelCase fields, 64-bit integers as strings,
// enums by name, bytes as Buffers, unset messages as null).
//
//   node scripts/gen-types.js [OUT]      (`npm run gen-types`; `make proto` runs it)
//
// The file is committed; tests/test_client_packages.py fails when it is stale.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { protosDir } from '../src/index.js';

const SERVICES = {
  lock: 'concord.lock.v1.LockService',
  semaphore: 'concord.semaphore.v1.SemaphoreService',
  queue: 'concord.queue.v1.QueueService',
  chat: 'concord.chat.v1.ChatService',
  autocomplete: 'concord.autocomplete.v1.AutocompleteService',
  files: 'concord.files.v1.FileService',
  election: 'concord.election.v1.ElectionService',
  ratelimit: 'concord.ratelimit.v1.RateLimitService',
};

const dir = protosDir();
const root = new protobuf.Root();
root.resolvePath = (origin, target) => (path.isAbsolute(target) ? target : path.join(dir, target));
const files = fs.readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.proto')).sort();
root.loadSync(files, { keepCase: false, alternateCommentMode: true });
root.resolveAll();

const LONGS = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const NUMBERS = new Set(['double', 'float', 'int32', 'uint32', 'sint32', 'fixed32', 'sfixed32']);

const name = (type) => type.fullName.replace(/^\./, '');

function doc(comment, indent) {
  if (!comment) return '';
  const lines = comment.trim().split('\n').map((l) => l.replace(/\*\//g, '*\\/'));
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? ` ${l}` : ''}`).join('\n')}\n${indent} */\n`;
}

function scalar(field, output) {
  const { type, resolvedType } = field;
  if (resolvedType instanceof protobuf.Enum) return output ? name(resolvedType) : `${name(resolvedType)} | number`;
  if (resolvedType) return `${name(resolvedType)}${output ? '__Output' : ''}`;
  if (NUMBERS.has(type)) return 'number';
  if (LONGS.has(type)) return output ? 'string' : 'number | string';
  if (type === 'bool') return 'boolean';
  if (type === 'string') return 'string';
  if (type === 'bytes') return output ? 'Buffer' : 'Buffer | Uint8Array | string';
  throw new Error(`unknown type ${type} of ${field.fullName}`);
}

function fieldType(field, output) {
  const t = scalar(field, output);
  if (field.map) return `{ [key: string]: ${t} }`;
  if (field.repeated) return `(${t})[]`;
  if (field.resolvedType instanceof protobuf.Type) return `${t} | null`;
  return t;
}

function message(type, output, indent) {
  let out = doc(type.comment, indent);
  out += `${indent}interface ${type.name}${output ? '__Output' : ''} {\n`;
  for (const field of type.fieldsArray) {
    // With defaults, every field but a oneof's members (proto3 `optional` ones too) is present in output.
    const optional = !output || field.partOf ? '?' : '';
    out += doc(field.comment, `${indent}  `);
    out += `${indent}  ${field.name}${optional}: ${fieldType(field, output)};\n`;
  }
  if (output) {
    for (const oneof of type.oneofsArray) {
      out += `${indent}  /** Which of the oneof's fields is set. */\n`;
      out += `${indent}  ${oneof.name}?: ${oneof.fieldsArray.map((f) => `'${f.name}'`).join(' | ')};\n`;
    }
  }
  return `${out}${indent}}\n`;
}

const lowerFirst = (s) => s[0].toLowerCase() + s.slice(1);

function service(svc, indent) {
  let out = doc(svc.comment, indent);
  out += `${indent}interface ${svc.name} {\n`;
  for (const method of svc.methodsArray) {
    const req = name(method.resolvedRequestType);
    const res = `${name(method.resolvedResponseType)}__Output`;
    let signatures;
    if (!method.requestStream && !method.responseStream) {
      signatures = [`(request: ${req}, options?: grpc.CallOptions): Promise<${res}>`];
    } else if (!method.responseStream) {
      signatures = [
        `(options: grpc.CallOptions, callback: Callback<${res}>): grpc.ClientWritableStream<${req}>`,
        `(callback: Callback<${res}>): grpc.ClientWritableStream<${req}>`,
      ];
    } else if (!method.requestStream) {
      signatures = [`(request: ${req}, options?: grpc.CallOptions): grpc.ClientReadableStream<${res}>`];
    } else {
      signatures = [`(options?: grpc.CallOptions): grpc.ClientDuplexStream<${req}, ${res}>`];
    }
    out += doc(method.comment, `${indent}  `);
    for (const s of signatures) out += `${indent}  ${lowerFirst(method.name)}${s};\n`;
    out += `${indent}  /** ${lowerFirst(method.name)}, by its name in the .proto file. */\n`;
    for (const s of signatures) out += `${indent}  ${method.name}${s};\n`;
  }
  return `${out}${indent}}\n`;
}

// Only what a service reaches (and the error table): not descriptor.proto's types.
const reached = new Set();
function reach(type) {
  if (!type || reached.has(type)) return;
  reached.add(type);
  if (type instanceof protobuf.Type) for (const f of type.fieldsArray) reach(f.resolvedType);
}
for (const svc of Object.values(SERVICES)) {
  for (const m of root.lookupService(svc).methodsArray) {
    reach(m.resolvedRequestType);
    reach(m.resolvedResponseType);
  }
}

const byNamespace = new Map();
function collect(ns) {
  for (const nested of ns.nestedArray) {
    const entries = byNamespace.get(name(ns)) ?? [];
    if (nested instanceof protobuf.Type && reached.has(nested)) {
      entries.push(message(nested, false, '  ') + message(nested, true, '  '));
    } else if (nested instanceof protobuf.Enum && reached.has(nested)) {
      const values = Object.keys(nested.values).map((v) => `'${v}'`).join(' | ');
      entries.push(`${doc(nested.comment, '  ')}  type ${nested.name} = ${values};\n`);
    } else if (nested instanceof protobuf.Service && Object.values(SERVICES).includes(name(nested))) {
      entries.push(service(nested, '  '));
    }
    byNamespace.set(name(ns), entries);
    if (nested instanceof protobuf.Namespace && !(nested instanceof protobuf.Service)) collect(nested);
  }
}
collect(root);

const reasonEnum = root.lookupEnum('concord.error.v1.Reason');
const reasonNames = Object.entries(reasonEnum.values).filter(([, n]) => n !== 0).map(([r]) => r);

let out = `// Generated by scripts/gen-types.js from Concord's .proto files: do not edit.
// \`npm run gen-types\` (or \`make proto\`) rewrites it; tests/test_client_packages.py
// fails when it is stale.
import type * as grpc from '@grpc/grpc-js';
import type { ConcordError } from './index.js';

/** A client-streaming call's callback: the response, or the ConcordError the call failed with. */
export type Callback<T> = (err: ConcordError | null, value?: T) => void;

/** Every error reason the server may send (protos/concord/error/v1/error.proto, docs/errors.md). */
export type Reason =
${reasonNames.map((r) => `  | '${r.replace(/^REASON_/, '')}'`).join('\n')};

/** The Client's per-service clients. */
export interface Services {
${Object.entries(SERVICES).map(([key, svc]) => `  ${key}: ${svc};`).join('\n')}
}
`;
for (const [ns, entries] of [...byNamespace].sort()) {
  if (entries.length) out += `\nexport declare namespace ${ns} {\n${entries.join('\n')}}\n`;
}

const target = process.argv[2] ?? fileURLToPath(new URL('../src/services.d.ts', import.meta.url));
fs.writeFileSync(target, out);
