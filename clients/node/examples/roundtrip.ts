// A lock, a queue and an election round trip in TypeScript, from the installed package:
//
//   npm install @concord/client typescript
//   npx tsc --strict --module nodenext --outDir dist roundtrip.ts && node dist/roundtrip.js
//
// The server's address and credentials come from the environment: CONCORD_ADDR
// (default 127.0.0.1:50051); CONCORD_CA, CONCORD_CERT and CONCORD_KEY (PEM files:
// TLS, mutual TLS) and CONCORD_TOKEN (a bearer token), each only when set.
// tests/test_client_packages.py compiles this under `tsc --strict` against the
// packed package and runs it.
import { randomUUID } from 'node:crypto';
import { Client, ConcordError, duration, type ClientOptions, type concord, type Leadership } from '@concord/client';

const env = process.env;
const options: ClientOptions = {};
if (env.CONCORD_CA) options.ca = env.CONCORD_CA;
if (env.CONCORD_CERT && env.CONCORD_KEY) Object.assign(options, { cert: env.CONCORD_CERT, key: env.CONCORD_KEY });
if (env.CONCORD_TOKEN) options.token = env.CONCORD_TOKEN;

const client = new Client(env.CONCORD_ADDR ?? '127.0.0.1:50051', options);
const soon = () => ({ deadline: Date.now() + 10_000 });
const name = `ts-example:${randomUUID()}`;

try {
  // A lock: taken, described, released; a second release names its reason.
  const got = await client.lock.acquire(
    { name, ttl: duration(10_000), waitTimeout: duration(5_000), owner: 'ts' }, soon());
  if (!got.acquired) throw new Error(`lock ${name} was not acquired`);
  const token: string = got.fencingToken; // a uint64 arrives as a string, exactly
  const held = await client.lock.describe({ name }, soon());
  console.log('lock', held.held, held.owner, token);
  await client.lock.release({ name, lease: got.lease }, soon());
  try {
    await client.lock.release({ name, lease: got.lease }, soon());
    throw new Error('a second release should fail');
  } catch (err) {
    if (!ConcordError.isReason(err, 'LOCK_NOT_HELD')) throw err;
    console.log('release again', err.status, err.reason, err.metadata.name === name);
  }

  // A queue: a task enqueued, dequeued with its payload, acked.
  const payload = Buffer.from(JSON.stringify({ to: 'ada@example.com' }));
  const { results } = await client.queue.enqueue({ queue: name, tasks: [{ type: 'send_welcome', payload }] }, soon());
  const { tasks } = await client.queue.dequeue({ queues: [name], waitTimeout: duration(5_000) }, soon());
  const task: concord.queue.v1.Task__Output | undefined = tasks[0];
  if (!task || task.taskId !== results[0]?.taskId || !task.payload.equals(payload)) {
    throw new Error(`dequeued ${JSON.stringify(task)}`);
  }
  await client.queue.ack({ queue: name, taskId: task.taskId, lease: task.lease }, soon());
  const stats = await client.queue.stats({ queue: name }, soon());
  console.log('queue', task.type, task.state, stats.ready, stats.leased);

  // An election: led (on a Lead stream the server renews), reported, resigned.
  const election = client.election(name, { ttl: 10_000 });
  const leadership: Leadership = await election.campaign(Buffer.from('ts-example'), { candidate: 'ts', timeout: 5_000 });
  const leader = await election.leader(soon());
  console.log('election', leader?.candidate, leader?.term === leadership.term, String(leader?.value));
  await leadership.resign(soon());
  const after: concord.election.v1.Leadership__Output | null = await election.leader(soon());
  if (after !== null || (await leadership.lost) !== undefined) throw new Error(`still led after resign: ${after?.term}`);
} finally {
  client.close();
}
