// Elections against the live server named by CONCORD_ADDR (tests/test_polyglot.py
// starts one and sets it; by hand: `make run`, then CONCORD_ADDR=127.0.0.1:50051 npm test),
// and against a fake ElectionService that fails the way a restarting server does.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, ConcordError, Election, Leadership, grpc } from '../src/index.js';

const addr = process.env.CONCORD_ADDR;
if (!addr && process.env.CI) throw new Error('CONCORD_ADDR is not set; CI must run these tests against a live server');
const skip = addr ? false : 'CONCORD_ADDR is not set: start a server (`make run`) and set CONCORD_ADDR=127.0.0.1:50051';

const unique = (what) => `node:${what}:${randomBytes(6).toString('hex')}`;
const soon = () => ({ deadline: Date.now() + 10_000 });
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// Polls check() until it returns something truthy, failing after 10 s.
async function eventually(what, check) {
  for (const deadline = Date.now() + 10_000; ;) {
    const got = await check();
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// Resolves with the promise's value, or rejects if it takes longer than ms.
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const rejection = (promise) => promise.then(() => null, (e) => e);

describe('elections over grpc-js', { skip }, () => {
  let client;
  before(() => { client = new Client(addr); });
  after(() => client?.close());

  const candidates = async (election) => (await client.election.leader({ election }, soon())).candidates;

  test('a campaign leads, proclaims and resigns; an ended term is NOT_LEADER', async () => {
    const name = unique('election');
    const election = client.election(name, { ttl: 5000 });
    assert.ok(election instanceof Election);
    const leadership = await election.campaign(Buffer.from('10.0.0.1:80'), { candidate: 'alice', timeout: 5000 });
    assert.ok(leadership instanceof Leadership);
    assert.match(leadership.term, /^\d+$/); // a uint64 arrives as a string, exactly
    assert.deepEqual([leadership.election, leadership.ended, leadership.error], [name, false, undefined]);
    const leader = await election.leader(soon());
    assert.deepEqual([leader.candidate, leader.value, leader.term], ['alice', Buffer.from('10.0.0.1:80'), leadership.term]);

    // Another candidate is not elected while alice leads: at once with timeout 0, or by its timeout.
    const once = await rejection(election.campaign(Buffer.from('x'), { candidate: 'bob', timeout: 0 }));
    assert.ok(once?.is('ELECTION_WAIT_TIMEOUT') && once.code === grpc.status.DEADLINE_EXCEEDED, String(once));
    const start = Date.now();
    const late = await rejection(election.campaign(Buffer.from('x'), { candidate: 'bob', timeout: 400 }));
    const waited = Date.now() - start;
    assert.ok(late?.is('ELECTION_WAIT_TIMEOUT'), String(late));
    assert.ok(waited >= 300 && waited < 3000, `a campaign with a 400 ms timeout returned after ${waited} ms`);
    const aborted = new AbortController();
    setTimeout(() => aborted.abort(new Error('gave up')), 200);
    const abort = await rejection(election.campaign(Buffer.from('x'), { signal: aborted.signal }));
    assert.equal(abort?.message, 'gave up');

    await leadership.proclaim(Buffer.from('10.0.0.1:81'), soon());
    assert.deepEqual((await election.leader(soon())).value, Buffer.from('10.0.0.1:81'));
    await leadership.resign(soon());
    assert.equal(await within(1000, 'lost after resign()', leadership.lost), undefined);
    assert.deepEqual([leadership.ended, leadership.error], [true, undefined]);
    assert.equal(await election.leader(soon()), null, 'once resign() resolves, nobody leads');
    await leadership.resign(soon()); // a second one does nothing

    // The ended term is refused with NOT_LEADER, and the next one is greater.
    for (const call of [() => election.resign(leadership.term, soon()),
      () => election.proclaim(leadership.term, Buffer.from('y'), soon()),
      () => election.refresh(leadership.term, 1000, soon())]) {
      const err = await rejection(call());
      assert.ok(err instanceof ConcordError && err.is('NOT_LEADER'), String(err));
      assert.deepEqual([err.code, err.metadata.election], [grpc.status.FAILED_PRECONDITION, name]);
    }
    const again = await election.campaign(Buffer.alloc(0), { timeout: 0 });
    assert.ok(BigInt(again.term) > BigInt(leadership.term), `${again.term} after ${leadership.term}`);
    await again.resign(soon());
  });

  test('candidates lead in FIFO order as each leadership resigns', async () => {
    const name = unique('fifo');
    const election = client.election(name, { ttl: 30_000 });
    const first = await election.campaign(Buffer.from('first'), { candidate: 'first' });
    const elected = [];
    const campaigns = [];
    for (const [i, who] of ['c0', 'c1'].entries()) { // c1 queues only once c0 has
      campaigns.push(election.campaign(Buffer.from(who), { candidate: who })
        .then((leadership) => { elected.push(who); return leadership; }));
      await eventually(`${who} to queue`, async () => (await candidates(name)) === i + 1);
    }
    await sleep(200);
    assert.deepEqual(elected, [], 'nobody is elected while first leads');

    await first.resign(soon());
    // far less than the 30 s TTL: the hand-over is at once
    const c0 = await within(10_000, 'c0 elected', campaigns[0]);
    assert.deepEqual(elected, ['c0']);
    assert.ok(BigInt(c0.term) > BigInt(first.term));
    assert.deepEqual([(await election.leader(soon())).candidate, await candidates(name)], ['c0', 1]);
    await c0.resign(soon());
    const c1 = await within(10_000, 'c1 elected', campaigns[1]);
    assert.deepEqual(elected, ['c0', 'c1']);
    assert.ok(BigInt(c1.term) > BigInt(c0.term));
    await c1.resign(soon());
  });

  test('observe sees elected, proclaimed, nobody, in order, and resumes after a position', async () => {
    const name = unique('observed');
    const election = client.election(name);
    const observer = election.observe();
    const seen = [];
    const reading = (async () => { for await (const change of observer) seen.push(change); })();
    await eventually('the state now', () => seen.length === 1);
    assert.deepEqual([seen[0].leader, seen[0].gap], [null, false]);

    const leadership = await election.campaign(Buffer.from('a1'), { candidate: 'a' });
    await leadership.proclaim(Buffer.from('a2'), soon());
    await leadership.resign(soon());
    await eventually('three changes', () => seen.length === 4);
    observer.close();
    await within(5000, 'the observer to end', reading);
    const { term } = leadership;
    assert.deepEqual(seen.slice(1).map(({ leader }) => leader && [leader.candidate, String(leader.value), leader.term]),
      [['a', 'a1', term], ['a', 'a2', term], null]);
    const positions = seen.map((c) => BigInt(c.position));
    assert.ok(positions.slice(1).every((p, i) => p > positions[i]), `positions ${positions}`);
    assert.ok(seen.every((c) => !c.gap));
    assert.equal(observer.position, seen[3].position);

    // Observing after the first change gives exactly the ones after it.
    const resumed = [];
    for await (const change of election.observe({ after: seen[1].position })) {
      if (resumed.push(change.position) === 2) break;
    }
    assert.deepEqual(resumed, [seen[2].position, seen[3].position]);
  });

  test('a leadership learns at once that it was lost', async () => {
    const election = client.election(unique('lost'), { ttl: 30_000 });
    const leadership = await election.campaign(Buffer.from('v'));
    await election.resign(leadership.term, soon()); // as an operator, or a stale peer, could
    // far less than the 30 s TTL: the server says LOST at once
    const error = await within(5000, 'the leadership to learn it was lost', leadership.lost);
    assert.ok(error?.is('NOT_LEADER') && leadership.error === error && leadership.ended, String(error));
    const err = await rejection(leadership.resign(soon()));
    assert.ok(ConcordError.isReason(err, 'NOT_LEADER'), String(err));
  });
});

