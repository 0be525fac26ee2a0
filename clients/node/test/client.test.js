// Runs against the live server named by CONCORD_ADDR (tests/test_polyglot.py
// starts one and sets it; by hand: `make run`, then CONCORD_ADDR=127.0.0.1:50051 npm test).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Client, ConcordError, duration, errorInfo, grpc, protosDir, reasons } from '../src/index.js';

const addr = process.env.CONCORD_ADDR;
if (!addr && process.env.CI) throw new Error('CONCORD_ADDR is not set; CI must run these tests against a live server');
const skip = addr ? false : 'CONCORD_ADDR is not set: start a server (`make run`) and set CONCORD_ADDR=127.0.0.1:50051';

const unique = (what) => `node:${what}:${randomBytes(6).toString('hex')}`;
const soon = () => ({ deadline: Date.now() + 10_000 });

// Polls check() until it returns something truthy, failing after 10 s.
async function eventually(what, check) {
  for (const deadline = Date.now() + 10_000; ;) {
    const got = await check();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => { setTimeout(resolve, 20); });
  }
}

// Deletes the queue's schedule if it is still there, so a failed test leaves nothing ticking.
async function deleteSchedule(client, queue, name) {
  await client.queue.deleteSchedule({ queue, name }, soon())
    .catch((err) => { if (!ConcordError.isReason(err, 'SCHEDULE_NOT_FOUND')) throw err; });
}

// Collects a server stream's messages until it ends.
function drain(stream) {
  return new Promise((resolve, reject) => {
    const messages = [];
    stream.on('data', (m) => messages.push(m)).on('error', reject).on('end', () => resolve(messages));
  });
}

describe('concord over grpc-js', { skip }, () => {
  let client;
  before(() => { client = new Client(addr); });
  after(() => client?.close());

  test('a lock is taken, described and released; a stale release names its reason', async () => {
    const name = unique('lock');
    const got = await client.lock.acquire({ name, ttl: duration(10_000), owner: 'node' }, soon());
    assert.equal(got.acquired, true);
    assert.match(got.fencingToken, /^\d+$/); // a uint64 arrives as a string, exactly
    const held = await client.lock.describe({ name }, soon());
    assert.deepEqual([held.held, held.owner, held.fencingToken], [true, 'node', got.fencingToken]);
    await client.lock.release({ name, lease: got.lease }, soon());

    const err = await client.lock.release({ name, lease: got.lease }, soon()).then(() => null, (e) => e);
    assert.equal(err?.code, grpc.status.FAILED_PRECONDITION);
    assert.deepEqual(errorInfo(err), { reason: 'LOCK_NOT_HELD', domain: 'concord', metadata: { name } });
    assert.ok(err instanceof ConcordError && err instanceof Error);
    assert.deepEqual([err.status, err.reason, err.metadata], ['FAILED_PRECONDITION', 'LOCK_NOT_HELD', { name }]);
    assert.ok(err.is('LOCK_NOT_HELD') && ConcordError.isReason(err, 'LOCK_NOT_HELD') && !err.is('PERMIT_NOT_HELD'));
    assert.match(err.message, /^LOCK_NOT_HELD \(FAILED_PRECONDITION\): /);
  });

  test('a semaphore keeps its limit until setLimit changes it; a higher one admits waiters at once', async () => {
    const name = unique('semaphore');
    const ttl = duration(10_000);
    const missing = await client.semaphore.acquire({ name, ttl }, soon()).then(() => null, (e) => e);
    assert.ok(missing?.is('NOT_FOUND') && missing.code === grpc.status.NOT_FOUND, String(missing)); // limit 0, none stored
    const first = await client.semaphore.acquire({ name, limit: 1, ttl }, soon()); // stores the limit 1
    assert.equal(first.acquired, true);
    const err = await client.semaphore.acquire({ name, limit: 2, ttl }, soon()).then(() => null, (e) => e);
    assert.ok(err?.is('SEMAPHORE_LIMIT_MISMATCH'), String(err));
    assert.deepEqual([err.code, err.metadata], [grpc.status.FAILED_PRECONDITION, { name, limit: '1', requested: '2' }]);
    const refused = await client.semaphore.describe({ name }, soon());
    assert.deepEqual([refused.limit, refused.held, refused.holders.length], [1, 1, 1]);

    const waiting = client.semaphore.acquire({ name, ttl, waitTimeout: duration(8000) }, soon()); // the stored limit
    await eventually('the waiter to queue', async () => (await client.semaphore.describe({ name }, soon())).waiters === 1);
    assert.deepEqual(await client.semaphore.setLimit({ name, limit: 2 }, soon()), { previousLimit: 1 });
    const second = await waiting;
    assert.equal(second.acquired, true);
    const raised = await client.semaphore.describe({ name }, soon());
    assert.deepEqual([raised.limit, raised.held, raised.waiters], [2, 2, 0]);

    const bad = await client.semaphore.SetLimit({ name, limit: 0 }, soon()).then(() => null, (e) => e);
    assert.ok(bad?.is('INVALID_ARGUMENT'), String(bad));
    for (const { permitId } of [first, second]) await client.semaphore.release({ name, permitId }, soon());
  });

  test('a rate limit takes units, says how long to wait, and Wait blocks until they pass', async () => {
    const key = unique('ratelimit');
    const limit = { rate: 5, period: duration(1000), burst: 1 };
    assert.equal((await client.ratelimit.check({ key, limit, hits: 1 }, soon())).allowed, true);
    const refused = await client.ratelimit.check({ key, limit, hits: 1 }, soon());
    assert.equal(refused.allowed, false);
    assert.ok(refused.retryAfter && Number(refused.retryAfter.nanos) + Number(refused.retryAfter.seconds) * 1e9 > 0);
    const waited = await client.ratelimit.wait({ key, limit, hits: 1, waitTimeout: duration(5000) }, soon());
    assert.equal(waited.allowed, true);
    await client.ratelimit.setLimit({ key, limit }, soon());
    const err = await client.ratelimit.check({ key, limit: { ...limit, rate: 6 }, hits: 1 }, soon())
      .then(() => null, (e) => e);
    assert.ok(err?.is('RATE_LIMIT_MISMATCH') && err.code === grpc.status.FAILED_PRECONDITION, String(err));
  });

  test('client.ratelimit(key, limit): check takes or refuses at once, wait blocks until the units pass', async () => {
    const api = client.ratelimit(unique('ratelimit-helper'), { rate: 2, per: 1000, burst: 1 });
    assert.equal((await api.check()).allowed, true);
    const refused = await api.check();
    assert.ok(!refused.allowed && refused.retryAfterMs > 0, JSON.stringify(refused));
    const started = Date.now();
    const waited = await api.wait(1, { timeout: 5000 });
    assert.ok(waited.allowed && Date.now() - started >= 100, JSON.stringify(waited));
    const short = await api.wait(1, { timeout: 0 }); // the next unit is 500 ms away: not now
    assert.ok(!short.allowed && short.retryAfterMs > 0, JSON.stringify(short));
    const never = await api.wait(2, { timeout: 1000 }); // more than the burst: never at once
    assert.ok(!never.allowed && never.retryAfterMs === -1, JSON.stringify(never));
  });

  test('task groups take turns; a group at its cap holds its next task and says why', async () => {
    const queue = unique('groups');
    await client.queue.setGroupRules({ queue, group: 'a', rules: { maxLeased: 1 } }, soon());
    const { results } = await client.queue.enqueue({ queue, tasks: [
      { type: 't', group: 'a' }, { type: 't', group: 'a' }, { type: 't', group: 'b' }] }, soon());
    const { tasks } = await client.queue.dequeue({ queues: [queue], maxTasks: 3 }, soon());
    assert.deepEqual(tasks.map((t) => t.group).sort(), ['a', 'b']);
    const { task } = await client.queue.getTask({ queue, taskId: results[1].taskId }, soon());
    assert.equal(task.waitReason, 'WAIT_REASON_GROUP_AT_CAP');
    const { groups } = await client.queue.listGroups({ queue }, soon());
    assert.deepEqual(groups.map((g) => [g.name, Number(g.ready), Number(g.leased)]), [['a', 1, 1], ['b', 0, 1]]);
  });

  test('searchTasks finds a dead task by its error text, a page at a time over the whole queue', async () => {
    const queue = unique('search');
    await client.queue.enqueue({ queue, tasks: [{ type: 'resize', payload: Buffer.from('{"file": "cat.png"}') },
      { type: 'mail', maxAttempts: 1, priority: 1000 }] }, soon());
    const { tasks: [task] } = await client.queue.dequeue({ queues: [queue] }, soon());
    await client.queue.nack({ queue, taskId: task.taskId, lease: task.lease, error: 'SMTP 550: Mailbox full',
      retryable: false }, soon());
    const found = await client.queue.searchTasks({ queue, errorContains: 'mailbox FULL' }, soon());
    assert.deepEqual(found.tasks.map((t) => [t.taskId, t.state, t.lastError]),
      [[task.taskId, 'TASK_STATE_DEAD', 'SMTP 550: Mailbox full']]);
    assert.equal(found.nextPageToken, '');
    const first = await client.queue.searchTasks({ queue, pageSize: 1 }, soon());
    assert.equal(first.tasks.length, 1);
    const rest = await client.queue.searchTasks({ queue, pageToken: first.nextPageToken }, soon());
    assert.deepEqual([...first.tasks, ...rest.tasks].map((t) => t.type), ['resize', 'mail']);  // ready, then dead
    const byPayload = await client.queue.searchTasks({ queue, payloadContains: Buffer.from('cat.png') }, soon());
    assert.deepEqual(byPayload.tasks.map((t) => t.type), ['resize']);
  });

  test("a stream's failure is a ConcordError too", async () => {
    const err = await drain(client.lock.hold({ name: '' }, soon())).then(() => null, (e) => e);
    assert.ok(ConcordError.isReason(err, 'INVALID_ARGUMENT'), String(err));
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
  });

  test('tasks go through a queue with their payload', async () => {
    const queue = unique('queue');
    const payload = Buffer.from(JSON.stringify({ to: 'ada@example.com' }));
    const { results } = await client.queue.enqueue({ queue, tasks: [{ type: 'send_welcome', payload }] }, soon());
    const { tasks: [task] } = await client.queue.dequeue({ queues: [queue], waitTimeout: duration(5000) }, soon());
    assert.equal(task.taskId, results[0].taskId);
    assert.deepEqual([task.type, task.payload, task.state], ['send_welcome', payload, 'TASK_STATE_LEASED']);
    await client.queue.ack({ queue, taskId: task.taskId, lease: task.lease }, soon());
    const stats = await client.queue.stats({ queue }, soon());
    assert.deepEqual([stats.ready, stats.leased], ['0', '0']);
  });

  test('waitTask wakes when the task is acked, with its result byte for byte', async () => {
    const queue = unique('results');
    const { results: [{ taskId }] } = await client.queue.enqueue({ queue, tasks: [{ type: 'sum' }] }, soon());
    const waiting = client.queue.waitTask({ queue, taskId, waitTimeout: duration(8000) }, soon());
    const { tasks: [task] } = await client.queue.dequeue({ queues: [queue], waitTimeout: duration(5000) }, soon());
    const result = Buffer.from([0, 0xff, 0x6f, 0x6b, 0xc3]); // not UTF-8, with a NUL
    await client.queue.ack({ queue, taskId, lease: task.lease, result, resultType: 'application/octet-stream' }, soon());
    const { finished, task: done } = await waiting;
    assert.equal(finished, true);
    assert.deepEqual([done.taskId, done.state, done.result, done.resultType],
      [taskId, 'TASK_STATE_SUCCEEDED', result, 'application/octet-stream']);
    assert.deepEqual((await client.queue.getTask({ queue, taskId }, soon())).task.result, result);
  });

  test('waitTask on a pending task ends at its timeout, unfinished', async () => {
    const queue = unique('pending');
    const { results: [{ taskId }] } = await client.queue.enqueue({ queue, tasks: [{ type: 'idle' }] }, soon());
    const start = Date.now();
    const { finished, task } = await client.queue.waitTask({ queue, taskId, waitTimeout: duration(300) }, soon());
    const waited = Date.now() - start;
    assert.ok(waited >= 250 && waited < 5000, `waited ${waited} ms for a 300 ms timeout`);
    assert.deepEqual([finished, task.taskId, task.state], [false, taskId, 'TASK_STATE_READY']);
  });

  test('getTask of an unknown id is TASK_NOT_FOUND', async () => {
    const err = await client.queue.getTask({ queue: unique('empty'), taskId: 'no-such-task' }, soon())
      .then(() => null, (e) => e);
    assert.ok(ConcordError.isReason(err, 'TASK_NOT_FOUND'), String(err));
    assert.equal(err.code, grpc.status.NOT_FOUND);
  });

  test('a schedule ticks a task that names it, and is listed, paused, resumed and deleted', async (t) => {
    const [queue, name] = [unique('scheduled'), 'every-second'];
    t.after(() => deleteSchedule(client, queue, name));
    const made = Date.now();
    const { schedule } = await client.queue.createSchedule(
      { queue, name, spec: { every: duration(1000), type: 'tick', payload: Buffer.from('ping') } }, soon());
    assert.deepEqual([schedule.queue, schedule.name, schedule.paused, schedule.runs, schedule.spec.timing,
      schedule.spec.type], [queue, name, false, '0', 'every', 'tick']);
    const first = Number(schedule.nextRunAt.seconds) * 1000;
    assert.ok(first >= made - 1000 && first <= Date.now() + 3000, `first tick at ${first}, made at ${made}`);

    const ticked = await eventually('the first tick', async () => {
      const { schedule: s } = await client.queue.getSchedule({ queue, name }, soon());
      return s.lastTaskId && s;
    });
    const { task } = await client.queue.getTask({ queue, taskId: ticked.lastTaskId }, soon());
    assert.deepEqual([task.schedule, task.type, task.payload, task.scheduledAt],
      [name, 'tick', Buffer.from('ping'), ticked.lastRunAt]);
    const { tasks } = await client.queue.peek({ queue }, soon());
    assert.ok(tasks.some((queued) => queued.taskId === ticked.lastTaskId), 'the ticked task waits in the queue');

    const { schedules, nextPageToken } = await client.queue.listSchedules({ queue }, soon());
    assert.deepEqual(schedules.map((s) => [s.name, s.paused]), [[name, false]]);
    assert.ok(schedules[0].nextRunAt && Number(schedules[0].runs) >= 1, JSON.stringify(schedules[0]));
    assert.equal(nextPageToken, '');

    const { schedule: paused } = await client.queue.pauseSchedule({ queue, name }, soon());
    assert.deepEqual([paused.paused, paused.nextRunAt], [true, null]);
    const { schedule: resumed } = await client.queue.resumeSchedule({ queue, name }, soon());
    assert.equal(resumed.paused, false);
    assert.ok(resumed.nextRunAt && BigInt(resumed.version) > BigInt(paused.version));

    await client.queue.deleteSchedule({ queue, name }, soon());
    const err = await client.queue.getSchedule({ queue, name }, soon()).then(() => null, (e) => e);
    assert.ok(ConcordError.isReason(err, 'SCHEDULE_NOT_FOUND'), String(err));
    assert.equal(err.code, grpc.status.NOT_FOUND);
    assert.deepEqual((await client.queue.listSchedules({ queue }, soon())).schedules, []);
    // The tasks it enqueued stay.
    assert.equal((await client.queue.getTask({ queue, taskId: task.taskId }, soon())).task.schedule, name);
  });

  test('listSchedules pages through the schedules; a cron spec keeps its time zone', async (t) => {
    const queue = unique('schedules');
    const names = ['a', 'b', 'c'];
    t.after(() => Promise.all(names.map((name) => deleteSchedule(client, queue, name))));
    for (const name of names) {
      const spec = { cron: '0 9 * * 1', timeZone: 'Europe/Oslo', type: 'weekly_report', missed: 'MISSED_TICKS_SKIP' };
      await client.queue.createSchedule({ queue, name, spec, paused: name === 'c' }, soon());
    }
    const first = await client.queue.listSchedules({ queue, pageSize: 2 }, soon());
    assert.equal(first.schedules.length, 2);
    assert.notEqual(first.nextPageToken, '');
    const second = await client.queue.listSchedules({ queue, pageSize: 2, pageToken: first.nextPageToken }, soon());
    assert.equal(second.nextPageToken, '');
    const listed = [...first.schedules, ...second.schedules];
    assert.deepEqual(listed.map((s) => s.name).sort(), names);
    assert.equal(listed.at(-1).name, 'c', 'paused ones come last');
    const { spec } = listed[0];
    assert.deepEqual([spec.timing, spec.cron, spec.timeZone, spec.missed],
      ['cron', '0 9 * * 1', 'Europe/Oslo', 'MISSED_TICKS_SKIP']);
  });

  test('createSchedule of a taken name is SCHEDULE_EXISTS; an unknown name is SCHEDULE_NOT_FOUND', async (t) => {
    const queue = unique('taken');
    t.after(() => deleteSchedule(client, queue, 'once'));
    const request = { queue, name: 'once', spec: { every: duration(3_600_000), type: 't' } };
    await client.queue.createSchedule(request, soon());
    const exists = await client.queue.createSchedule(request, soon()).then(() => null, (e) => e);
    assert.ok(ConcordError.isReason(exists, 'SCHEDULE_EXISTS'), String(exists));
    assert.equal(exists.code, grpc.status.ALREADY_EXISTS);
    for (const method of ['getSchedule', 'pauseSchedule', 'resumeSchedule', 'deleteSchedule']) {
      const err = await client.queue[method]({ queue, name: 'missing' }, soon()).then(() => null, (e) => e);
      assert.ok(err?.is('SCHEDULE_NOT_FOUND') && err.code === grpc.status.NOT_FOUND, `${method}: ${err}`);
    }
  });

  test('pending chat messages stream in order', async () => {
    const [joe, jenny] = [unique('joe'), unique('jenny')];
    const { chatId } = await client.chat.createChat({ sender: joe, recipients: [jenny], message: 'Hi all' }, soon());
    await client.chat.sendMessage({ chatId, sender: joe, body: 'second' }, soon());
    const responses = await drain(client.chat.fetchPending({ recipient: jenny }, soon()));
    assert.deepEqual(responses.flatMap((r) => r.messages).map((m) => [m.sender, m.body, m.messageId]),
      [[joe, 'Hi all', '1'], [joe, 'second', '2']]);
    assert.deepEqual(await drain(client.chat.fetchPending({ recipient: jenny }, soon())), []);
  });

  test('a file uploads as a client stream and downloads line by line', async () => {
    const [sender, worker] = [unique('shipper'), unique('worker')];
    const { chatId: group } = await client.chat.createChat({ sender, recipients: [worker], message: 'logs' }, soon());
    const uploaded = await new Promise((resolve, reject) => {
      const upload = client.files.upload(soon(), (err, res) => (err ? reject(err) : resolve(res)));
      upload.write({ header: { group, sender, name: 'app.log' } });
      upload.write({ data: Buffer.from('first\nsec') });
      upload.end({ data: Buffer.from('ond\n') });
    });
    assert.equal(uploaded.size, '13');
    const responses = await drain(client.files.download({ fileId: uploaded.fileId, lines: true }, soon()));
    assert.deepEqual(responses.flatMap((r) => r.lines).map(String), ['first', 'second']);
    assert.equal((await client.files.markDone({ fileId: uploaded.fileId, worker }, soon())).deleted, true);
  });

  test('autocomplete suggests by prefix in any case', async () => {
    const index = unique('guild');
    await client.autocomplete.addNames({ index, names: [{ name: 'Åsa' }, { name: 'Astrid', score: 12 }] }, soon());
    const { suggestions } = await client.autocomplete.suggest({ index, prefix: 'AS', order: 'SUGGEST_ORDER_SCORE' }, soon());
    assert.deepEqual(suggestions.map((s) => s.name), ['Astrid']);
  });

  test('the producer example enqueues one task per argument', async () => {
    const queue = unique('produced');
    const { stdout } = await promisify(execFile)(process.execPath,
      ['examples/producer.js', '--addr', addr, queue, 'greet', '{"n": 1}', '{"n": 2}'], { timeout: 20_000 });
    const ids = stdout.trim().split('\n');
    const { tasks } = await client.queue.peek({ queue }, soon());
    assert.deepEqual(tasks.map((t) => [t.taskId, JSON.parse(t.payload)]), [[ids[0], { n: 1 }], [ids[1], { n: 2 }]]);
  });
});

describe('without a server', () => {
  test('the error table comes from error.proto', () => {
    const table = reasons();
    assert.deepEqual(table.LOCK_NOT_HELD, { code: grpc.status.FAILED_PRECONDITION, status: 'FAILED_PRECONDITION' });
    assert.deepEqual(table.REDIS_UNAVAILABLE, { code: grpc.status.UNAVAILABLE, status: 'UNAVAILABLE' });
    assert.deepEqual(table.TASK_FINISHED, { code: grpc.status.FAILED_PRECONDITION, status: 'FAILED_PRECONDITION' });
    assert.deepEqual(table.SCHEDULE_NOT_FOUND, { code: grpc.status.NOT_FOUND, status: 'NOT_FOUND' });
    assert.deepEqual(table.SCHEDULE_EXISTS, { code: grpc.status.ALREADY_EXISTS, status: 'ALREADY_EXISTS' });
    assert.throws(() => new ConcordError('x').is('LOCK_NOT_HLED'), /not a Concord error reason/);
  });

  test('protos that cannot be found are named, never a bare ENOENT', () => {
    const saved = process.env.CONCORD_PROTOS;
    process.env.CONCORD_PROTOS = '/nonexistent/protos';
    try {
      assert.throws(() => new Client('127.0.0.1:1'),
        /CONCORD_PROTOS=\/nonexistent\/protos is not a directory of Concord's \.proto files/);
    } finally {
      if (saved === undefined) delete process.env.CONCORD_PROTOS;
      else process.env.CONCORD_PROTOS = saved;
    }
    assert.throws(() => new Client('127.0.0.1:1', { protos: '/nonexistent' }), /the protos option \(\/nonexistent\)/);
    assert.ok(protosDir().endsWith('protos'));
  });

  test('TLS options need their files, and both halves of a client certificate', () => {
    assert.throws(() => new Client('127.0.0.1:1', { ca: '/nonexistent/ca.pem' }), /cannot read the CA file/);
    assert.throws(() => new Client('127.0.0.1:1', { cert: Buffer.from('x') }), /needs both cert and key/);
    new Client('127.0.0.1:1', { token: 'plaintext-is-fine' }).close();
    new Client('127.0.0.1:1', { tls: true, token: 't' }).close();
  });
});
