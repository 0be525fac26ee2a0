// Lock, semaphore and read-write lock sessions (src/session.js) against the live
// server named by CONCORD_ADDR (tests/test_polyglot.py starts one and sets it).
// Nothing sleeps to let things settle: conditions are polled with deadlines.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client, ConcordError, Session, duration, grpc } from '../src/index.js';

const addr = process.env.CONCORD_ADDR;
if (!addr && process.env.CI) throw new Error('CONCORD_ADDR is not set; CI must run these tests against a live server');
const skip = addr ? false : 'CONCORD_ADDR is not set: start a server (`make run`) and set CONCORD_ADDR=127.0.0.1:50051';

const unique = (what) => `node:session:${what}:${randomBytes(6).toString('hex')}`;
const soon = () => ({ deadline: Date.now() + 10_000 });
const ttl = duration(10_000);

// Polls check() until it returns something truthy, failing after 10 s.
async function eventually(what, check) {
  for (const deadline = Date.now() + 10_000; ;) {
    const got = await check();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => { setTimeout(resolve, 5); });
  }
}

const settled = (promise) => promise.then((value) => ({ value }), (error) => ({ error }));

// The client's stub for a service, wrapped to count the Session streams it opens.
function countingStub(client, service) {
  const stub = { opened: 0 };
  stub.Session = (...args) => {
    stub.opened += 1;
    return client[service].session(...args);
  };
  return stub;
}

// A TCP proxy in front of the server whose connections the test can cut.
async function cuttableProxy(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const sockets = new Set();
  const server = net.createServer((down) => {
    const up = net.connect(port, host);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('error', () => { down.destroy(); up.destroy(); });
      s.on('close', () => { sockets.delete(s); down.destroy(); up.destroy(); });
    }
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  return {
    address: `127.0.0.1:${server.address().port}`,
    connections: () => sockets.size,
    cut() { for (const s of sockets) s.destroy(); },
    close() { this.cut(); server.close(); },
  };
}

describe('sessions over grpc-js', { skip }, () => {
  let client;
  let other;
  let unary;
  before(() => {
    client = new Client(addr);
    other = new Client(addr);
    unary = new Client(addr, { sessions: false });
  });
  after(() => {
    client?.close();
    other?.close();
    unary?.close();
  });

  test('acquire, refresh and release go over one stream; the client also reads the lock through its session', async () => {
    const name = unique('one');
    const stub = countingStub(client, 'lock');
    const session = new Session(stub, 'lock');
    try {
      const got = await session.request('acquire', { name, ttl, owner: 'node' }, soon());
      assert.equal(got.acquired, true);
      const held = await client.lock.describe({ name }, soon());
      assert.deepEqual([held.held, held.owner, held.fencingToken], [true, 'node', got.fencingToken]);
      const refreshed = await session.request('refresh', { name, lease: got.lease, ttl: duration(20_000) }, soon());
      assert.ok(Number(refreshed.expiresAt.seconds) >= Number(got.expiresAt.seconds));
      assert.deepEqual(await session.request('release', { name, lease: got.lease }, soon()), {});
      assert.equal((await client.lock.describe({ name }, soon())).held, false);
      const again = await session.request('acquire', { name, ttl }, soon());
      await session.request('release', { name, lease: again.lease }, soon());
      assert.equal(stub.opened, 1);
    } finally {
      session.close();
    }

    // The client's own lock methods, each way they are named.
    const got = await client.lock.Acquire({ name, ttl }, soon());
    await client.lock.Refresh({ name, lease: got.lease, ttl }, soon());
    await client.lock.release({ name, lease: got.lease }, soon());
  });

  test('an answer\'s error is the error the unary call gives: LOCK_NOT_HELD, PERMIT_NOT_HELD, INVALID_ARGUMENT', async () => {
    const name = unique('errors');
    const got = await client.lock.acquire({ name, ttl }, soon());
    await client.lock.release({ name, lease: got.lease }, soon());
    const cases = [
      (c) => c.lock.release({ name, lease: got.lease }, soon()),
      (c) => c.lock.refresh({ name, lease: got.lease, ttl }, soon()),
      (c) => c.semaphore.release({ name, permitId: 'no-such-permit' }, soon()),
      (c) => c.semaphore.refresh({ name, permitId: 'no-such-permit', ttl }, soon()),
      (c) => c.lock.acquire({ name: '', ttl }, soon()),
      (c) => c.rwlock.release({ name, lease: 'no-such-lease' }, soon()),
    ];
    const reasonsSeen = [];
    for (const call of cases) {
      const viaSession = await call(client).then(() => null, (e) => e);
      const viaCall = await call(unary).then(() => null, (e) => e);
      assert.ok(viaSession instanceof ConcordError, String(viaSession));
      assert.ok(viaCall instanceof ConcordError, String(viaCall));
      for (const key of ['code', 'status', 'reason', 'metadata', 'details', 'message']) {
        assert.deepEqual(viaSession[key], viaCall[key], `${key} of ${viaCall.message}`);
      }
      reasonsSeen.push(viaSession.reason);
    }
    assert.deepEqual(reasonsSeen,
      ['LOCK_NOT_HELD', 'LOCK_NOT_HELD', 'PERMIT_NOT_HELD', 'PERMIT_NOT_HELD', 'INVALID_ARGUMENT', 'LOCK_NOT_HELD']);
    const err = await client.lock.release({ name, lease: got.lease }, soon()).then(() => null, (e) => e);
    assert.ok(err.is('LOCK_NOT_HELD') && err.code === grpc.status.FAILED_PRECONDITION);
    assert.deepEqual(err.metadata, { name });
  });

  test('an abandoned acquire never leaves the lock held, however its abort races the grant', async () => {
    const name = unique('abandon');
    for (let round = 0; round < 60; round += 1) {
      // A grant that beat the cancel is released at once: well within this wait.
      const held = await other.lock.acquire({ name, ttl, owner: 'holder', waitTimeout: duration(5000) }, soon());
      assert.equal(held.acquired, true, `round ${round}: the lock is free again`);
      const abort = new AbortController();
      const byDeadline = round % 3 === 2;
      // A grant left behind would hold the lock for an hour, far past every wait below.
      const waiting = settled(client.lock.acquire({ name, ttl: duration(3_600_000), owner: 'waiter', waitTimeout: duration(10_000) },
        byDeadline ? { deadline: Date.now() + 30 + (round % 7) } : { ...soon(), signal: abort.signal }));
      if (round % 2 === 0) {
        await eventually('the waiter to queue', async () => (await other.lock.describe({ name }, soon())).waiters === 1);
      }
      // Release and abort in either order, at once or a little apart: a grant may beat the cancel.
      const release = () => other.lock.release({ name, lease: held.lease }, soon());
      let released;
      if (round % 4 < 2) {
        released = release();
        abort.abort();
      } else {
        abort.abort();
        released = release();
      }
      await released;
      const { value, error } = await waiting;
      if (byDeadline) {
        // The deadline may pass before or after the grant: either it is ours, or it was given up.
        if (value) await client.lock.release({ name, lease: value.lease }, soon());
        else assert.equal(error.code, grpc.status.DEADLINE_EXCEEDED, String(error));
      } else {
        assert.equal(value, undefined);
        assert.equal(error.name, 'AbortError', String(error));
      }
      await eventually(`round ${round}: the lock to be free with nobody waiting`, async () => {
        const d = await other.lock.describe({ name }, soon());
        return !d.held && d.waiters === 0;
      });
    }
  });

  test('a request already aborted or past its deadline is not sent', async () => {
    const name = unique('early');
    const abort = new AbortController();
    abort.abort(new Error('gave up'));
    await assert.rejects(client.lock.acquire({ name, ttl }, { signal: abort.signal }), /gave up/);
    const late = await client.lock.acquire({ name, ttl }, { deadline: Date.now() - 1 }).then(() => null, (e) => e);
    assert.equal(late?.code, grpc.status.DEADLINE_EXCEEDED);
    assert.equal((await client.lock.describe({ name }, soon())).held, false);
  });

  test('a broken stream fails its requests in flight; the next request opens another', async () => {
    const name = unique('broken');
    const proxy = await cuttableProxy(addr);
    const viaProxy = new Client(proxy.address);
    try {
      const held = await other.lock.acquire({ name, ttl }, soon());
      const first = await viaProxy.lock.acquire({ name: `${name}:other`, ttl }, soon()); // opens the stream
      const waiting = [1, 2, 3].map(() => settled(viaProxy.lock.acquire({ name, ttl, waitTimeout: duration(10_000) },
        soon())));
      await eventually('the waiters to queue', async () => (await other.lock.describe({ name }, soon())).waiters === 3);
      proxy.cut();
      for (const { value, error } of await Promise.all(waiting)) {
        assert.equal(value, undefined);
        assert.ok(error instanceof ConcordError, String(error));
        assert.equal(error.code, grpc.status.UNAVAILABLE, String(error));
      }
      // The server gave up the waits of the stream that went away.
      await eventually('the waiters to go', async () => (await other.lock.describe({ name }, soon())).waiters === 0);
      await other.lock.release({ name, lease: held.lease }, soon());
      const got = await viaProxy.lock.acquire({ name, ttl, waitTimeout: duration(5000) }, soon()); // a new stream
      assert.equal(got.acquired, true);
      await viaProxy.lock.release({ name, lease: got.lease }, soon());
      await viaProxy.lock.release({ name: `${name}:other`, lease: first.lease }, soon()); // the lease outlived its stream
    } finally {
      viaProxy.close();
      proxy.close();
    }
  });

  test('the lock passes between two clients in FIFO order', async () => {
    const name = unique('fifo');
    const third = new Client(addr);
    try {
      const a = await client.lock.acquire({ name, ttl, owner: 'a' }, soon());
      const b = other.lock.acquire({ name, ttl, owner: 'b', waitTimeout: duration(10_000) }, soon());
      await eventually('b to queue', async () => (await client.lock.describe({ name }, soon())).waiters === 1);
      const c = third.lock.acquire({ name, ttl, owner: 'c', waitTimeout: duration(10_000) }, soon());
      await eventually('c to queue', async () => (await client.lock.describe({ name }, soon())).waiters === 2);
      await client.lock.release({ name, lease: a.lease }, soon());
      const gotB = await b;
      assert.equal(gotB.acquired, true);
      const d = await client.lock.describe({ name }, soon());
      assert.deepEqual([d.owner, d.waiters], ['b', 1]);
      assert.ok(BigInt(gotB.fencingToken) > BigInt(a.fencingToken));
      // a asks again: it queues behind c.
      const a2 = client.lock.acquire({ name, ttl, owner: 'a', waitTimeout: duration(10_000) }, soon());
      await eventually('a to queue', async () => (await client.lock.describe({ name }, soon())).waiters === 2);
      await other.lock.release({ name, lease: gotB.lease }, soon());
      const gotC = await c;
      assert.equal((await client.lock.describe({ name }, soon())).owner, 'c');
      await third.lock.release({ name, lease: gotC.lease }, soon());
      const gotA = await a2;
      assert.ok(BigInt(gotA.fencingToken) > BigInt(gotC.fencingToken) && BigInt(gotC.fencingToken) > BigInt(gotB.fencingToken));
      await client.lock.release({ name, lease: gotA.lease }, soon());
    } finally {
      third.close();
    }

    // Back and forth: each client's next acquire queues while the other holds.
    const rounds = 20;
    const tokens = [];
    const worker = (c, who) => (async () => {
      for (let i = 0; i < rounds; i += 1) {
        const got = await c.lock.acquire({ name, ttl, owner: who, waitTimeout: duration(10_000) }, soon());
        assert.equal(got.acquired, true);
        tokens.push([who, BigInt(got.fencingToken)]);
        await c.lock.release({ name, lease: got.lease }, soon());
      }
    })();
    await Promise.all([worker(client, 'a'), worker(other, 'b')]);
    assert.equal(tokens.length, 2 * rounds);
    for (let i = 1; i < tokens.length; i += 1) assert.ok(tokens[i][1] > tokens[i - 1][1], 'tokens increase');
  });

  test('a semaphore over its session: limit, waiting, handoff, refresh, PERMIT_NOT_HELD', async () => {
    const name = unique('semaphore');
    const p1 = await client.semaphore.acquire({ name, limit: 2, ttl }, soon());
    const p2 = await other.semaphore.acquire({ name, limit: 2, ttl }, soon());
    assert.ok(p1.acquired && p2.acquired);
    const none = await client.semaphore.acquire({ name, limit: 2, ttl }, soon());
    assert.equal(none.acquired, false); // full, and waitTimeout 0 tries once
    const waiting = client.semaphore.acquire({ name, limit: 2, ttl, waitTimeout: duration(10_000) }, soon());
    await eventually('the waiter to queue', async () => (await other.semaphore.describe({ name }, soon())).waiters === 1);
    await other.semaphore.release({ name, permitId: p2.permitId }, soon());
    const p3 = await waiting;
    assert.equal(p3.acquired, true);
    const refreshed = await client.semaphore.refresh({ name, permitId: p3.permitId, ttl: duration(20_000) }, soon());
    assert.ok(refreshed.expiresAt);
    const stale = await other.semaphore.release({ name, permitId: p2.permitId }, soon()).then(() => null, (e) => e);
    assert.ok(stale?.is('PERMIT_NOT_HELD'), String(stale));
    assert.equal(stale.code, grpc.status.FAILED_PRECONDITION);
    for (const p of [p1, p3]) await client.semaphore.release({ name, permitId: p.permitId }, soon());
    assert.equal((await other.semaphore.describe({ name }, soon())).held, 0);

    // An abandoned semaphore wait leaves no waiter behind.
    const held = await other.semaphore.acquire({ name, limit: 2, permits: 2, ttl }, soon());
    for (let round = 0; round < 20; round += 1) {
      const abort = new AbortController();
      const w = settled(client.semaphore.acquire({ name, limit: 2, ttl, waitTimeout: duration(10_000) },
        { ...soon(), signal: abort.signal }));
      if (round % 2) await eventually('the waiter', async () => (await other.semaphore.describe({ name }, soon())).waiters === 1);
      abort.abort();
      assert.equal((await w).error?.name, 'AbortError');
      await eventually('no waiter', async () => (await other.semaphore.describe({ name }, soon())).waiters === 0);
    }
    await other.semaphore.release({ name, permitId: held.permitId }, soon());
    await eventually('nothing held', async () => (await other.semaphore.describe({ name }, soon())).held === 0);
  });

  test('a read-write lock over its session', async () => {
    const name = unique('rwlock');
    const r1 = await client.rwlock.acquire({ name, mode: 'MODE_READ', ttl }, soon());
    const r2 = await other.rwlock.acquire({ name, mode: 'MODE_READ', ttl }, soon());
    assert.ok(r1.acquired && r2.acquired);
    const w = client.rwlock.acquire({ name, mode: 'MODE_WRITE', ttl, waitTimeout: duration(10_000) }, soon());
    await client.rwlock.release({ name, lease: r1.lease }, soon());
    await other.rwlock.refresh({ name, lease: r2.lease, ttl }, soon());
    await other.rwlock.release({ name, lease: r2.lease }, soon());
    const got = await w;
    assert.equal(got.acquired, true);
    await client.rwlock.release({ name, lease: got.lease }, soon());
  });

  test('close() fails the requests in flight and ends the streams', async () => {
    const name = unique('close');
    const c = new Client(addr);
    const held = await other.lock.acquire({ name, ttl }, soon());
    const waiting = settled(c.lock.acquire({ name, ttl, waitTimeout: duration(10_000) }, soon()));
    await eventually('the waiter to queue', async () => (await other.lock.describe({ name }, soon())).waiters === 1);
    c.close();
    const { error } = await waiting;
    assert.equal(error?.code, grpc.status.CANCELLED, String(error));
    await eventually('the wait to go', async () => (await other.lock.describe({ name }, soon())).waiters === 0);
    await other.lock.release({ name, lease: held.lease }, soon());
  });

  test('a script that never closes its client still exits once its sessions are idle', async () => {
    const script = `
      import { Client, duration } from ${JSON.stringify(fileURLToPath(new URL('../src/index.js', import.meta.url)))};
      const c = new Client(${JSON.stringify(addr)});
      const name = ${JSON.stringify(unique('exit'))};
      const got = await c.lock.acquire({ name, ttl: duration(5000) });
      await c.lock.release({ name, lease: got.lease });
      console.log('done');`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const code = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => { child.kill(); reject(new Error('the script did not exit within 20 s')); }, 20_000);
      child.on('exit', (c) => { clearTimeout(timer); resolve(c); });
    });
    assert.deepEqual([code, out.trim()], [0, 'done']);
  });
});
