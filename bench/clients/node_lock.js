// The Concord Node client's side of the bench's handoff scenario
// (bench/scenarios/handoff.py): the workload handoff_clients.py runs for the other
// implementations, with the protocol of the etcd peer's program
// (bench/clients/lockrun/lockrun.go), driven the way Node users drive a Concord lock:
// one Client (one channel, so one lock Session stream) per process, and per client
// an async loop on the one lock.
//
// Every client loops until end_at: acq_start, acquire (wait_timeout = -wait),
// acq_end, hold -hold seconds, rel_sent, release, rel_end, think -think seconds.
// Times are CLOCK_MONOTONIC in seconds (process.hrtime.bigint() on Linux), the
// clock of Python's time.monotonic(), so the bench can merge them with its own.
//
// Protocol with the bench: after connecting and opening the lock session, it
// prints "ready" on stdout and reads one line "start_at end_at" from stdin (unless
// both are given with -start-at and -end-at). At the end it prints one JSON object,
// shaped like a handoff_clients.py report:
//
//	{"events": [[client, acq_start, acq_end, rel_sent, rel_end], ...],
//	 "client_cpu_busy": cpu seconds of this process / window, "errors": n}
//
// A timed-out acquire (acquired false) has NaN for rel_sent and rel_end (Python's
// json reads NaN). Errors are counted, logged on stderr, and end that client's loop.
//
//   node bench/clients/node_lock.js -endpoint 127.0.0.1:50051 -key bench:handoff:node \
//     -clients 0,1,2,3 -hold 0.002 -think 0.005 -wait 30 -ttl 10
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, ConcordError, duration } from '../../clients/node/src/index.js';

const FLAGS = {
  endpoint: ['127.0.0.1:50051', 'the Concord server, host:port'],
  key: ['bench:handoff:concord-node', "the lock's name"],
  clients: ['0', 'comma-separated ids of the clients this process runs'],
  hold: ['0.002', 'seconds to hold the lock'],
  think: ['0.005', 'seconds between a release and the next acquire'],
  wait: ['30', 'acquire timeout (wait_timeout), seconds'],
  ttl: ['10', 'lock TTL, seconds'],
  'start-at': ['NaN', 'CLOCK_MONOTONIC second to start at (else read from stdin)'],
  'end-at': ['NaN', 'CLOCK_MONOTONIC second to stop at (else read from stdin)'],
};

function usage(message) {
  if (message) process.stderr.write(`nodelock: ${message}\n`);
  process.stderr.write('usage: node node_lock.js [flags]\n');
  for (const [name, [def, help]] of Object.entries(FLAGS)) process.stderr.write(`  -${name} ${def}\t${help}\n`);
  process.exit(2);
}

// Flags as Go's flag package takes them: -name value, -name=value, --name value, --name=value.
function parseFlags(argv) {
  const values = Object.fromEntries(Object.entries(FLAGS).map(([name, [def]]) => [name, def]));
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '-h' || arg === '-help' || arg === '--help') usage();
    const m = /^--?([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (!m || !Object.hasOwn(FLAGS, m[1])) usage(`flag provided but not defined: ${arg}`);
    let value = m[2];
    if (value === undefined) {
      i += 1;
      if (i >= argv.length) usage(`flag needs an argument: -${m[1]}`);
      value = argv[i];
    }
    values[m[1]] = value;
  }
  const number = (name) => {
    const v = Number(values[name]);
    if (Number.isNaN(v) && values[name] !== 'NaN') usage(`invalid value ${JSON.stringify(values[name])} for -${name}`);
    return v;
  };
  const ids = values.clients.split(',').map((f) => {
    const id = Number(f.trim());
    if (!Number.isInteger(id) || f.trim() === '') usage(`bad -clients ${JSON.stringify(values.clients)}`);
    return id;
  });
  return {
    endpoint: values.endpoint, key: values.key, ids,
    hold: number('hold'), think: number('think'), wait: number('wait'), ttl: number('ttl'),
    startAt: number('start-at'), endAt: number('end-at'),
  };
}

/** CLOCK_MONOTONIC in seconds: the clock of Python's time.monotonic() on Linux. */
const now = () => Number(process.hrtime.bigint()) / 1e9;

/** This process's user + system CPU time in seconds, every thread. */
function cpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

async function sleepUntil(t) {
  const d = t - now();
  if (d > 0) await sleep(d * 1000);
}

// One line from stdin.
function readLine() {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk) => {
      buffered += chunk;
      const nl = buffered.indexOf('\n');
      if (nl >= 0) done(null, buffered.slice(0, nl));
    };
    const onEnd = () => done(buffered ? null : new Error('stdin ended'), buffered);
    const done = (err, line) => {
      process.stdin.off('data', onData).off('end', onEnd).off('error', done);
      process.stdin.pause();
      if (err) reject(err); else resolve(line);
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', onData).on('end', onEnd).on('error', done);
  });
}

// A number as JSON, NaN as the literal Python's json.loads reads.
const num = (v) => (Number.isNaN(v) ? 'NaN' : String(v));

function report(events, busy, errors) {
  const rows = events.map((e) => `[${e[0]}, ${e.slice(1).map(num).join(', ')}]`);
  return `{"events": [${rows.join(', ')}], "client_cpu_busy": ${num(busy)}, "errors": ${errors}}\n`;
}

async function runClient(client, cid, cfg, out) {
  await sleepUntil(cfg.startAt);
  const request = { name: cfg.key, ttl: duration(Math.round(cfg.ttl * 1000)), waitTimeout: duration(Math.round(cfg.wait * 1000)) };
  const fail = (what, err) => {
    process.stderr.write(`nodelock: client ${cid}: ${what}: ${err?.message ?? err}\n`);
    out.errors += 1;
  };
  while (now() < cfg.endAt) {
    const t0 = now();
    let got;
    try {
      got = await client.lock.acquire(request, { deadline: Date.now() + cfg.wait * 1000 + 10_000 });
    } catch (err) {
      out.events.push([cid, t0, now(), NaN, NaN]);
      fail('acquire', err);
      return;
    }
    const t1 = now();
    if (!got.acquired) {
      out.events.push([cid, t0, t1, NaN, NaN]);
      continue;
    }
    await sleep(cfg.hold * 1000);
    const t2 = now();
    let error;
    try {
      await client.lock.release({ name: cfg.key, lease: got.lease }, { deadline: Date.now() + 10_000 });
    } catch (err) {
      error = err;
    }
    out.events.push([cid, t0, t1, t2, now()]);
    if (error) {
      fail('release', error);
      return;
    }
    await sleep(cfg.think * 1000);
  }
}

// Connects and opens the lock session (a refresh of no lease: LOCK_NOT_HELD, or any answer, will do).
async function warmUp(client, key) {
  await client.lock.describe({ name: key }, { deadline: Date.now() + 10_000 });
  try {
    await client.lock.refresh({ name: key, lease: 'bench-warm-up', ttl: duration(1000) }, { deadline: Date.now() + 10_000 });
  } catch (err) {
    if (!(err instanceof ConcordError) || !err.reason) throw err; // the server answered: the session is open
  }
}

async function main() {
  const cfg = parseFlags(process.argv.slice(2));
  const client = new Client(cfg.endpoint);
  try {
    await warmUp(client, cfg.key);
  } catch (err) {
    process.stderr.write(`nodelock: connect: ${err.message}\n`);
    process.exit(1);
  }
  if (Number.isNaN(cfg.startAt) || Number.isNaN(cfg.endAt)) {
    process.stdout.write('ready\n');
    let line;
    try {
      line = await readLine();
    } catch (err) {
      process.stderr.write(`nodelock: reading start_at end_at: ${err.message}\n`);
      process.exit(1);
    }
    const fields = line.trim().split(/\s+/).map(Number);
    if (fields.length < 2 || fields.slice(0, 2).some((v) => !Number.isFinite(v))) {
      process.stderr.write(`nodelock: bad start line ${JSON.stringify(line)}\n`);
      process.exit(1);
    }
    [cfg.startAt, cfg.endAt] = fields;
    await warmUp(client, cfg.key).catch(() => {}); // the session may have idled out while the bench got ready
  }

  const out = { events: [], errors: 0 };
  const clients = cfg.ids.map((cid) => runClient(client, cid, cfg, out));
  await sleepUntil(cfg.startAt);
  const cpu0 = cpuSeconds();
  await Promise.all(clients);
  const cpu = cpuSeconds() - cpu0;
  const window = now() - cfg.startAt;
  const busy = window > 0 ? cpu / window : NaN;
  await new Promise((resolve) => { process.stdout.write(report(out.events, busy, out.errors), resolve); });
  client.close();
}

main().catch((err) => {
  process.stderr.write(`nodelock: ${err?.stack ?? err}\n`);
  process.exit(1);
});
