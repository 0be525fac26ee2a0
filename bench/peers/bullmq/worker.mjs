// BullMQ's side of bench/scenarios/peers_queue.py: a Worker as its docs show, with a
// no-op processor. Environment: PEER_URL (redis://...), PEER_QUEUE, PEER_CONCURRENCY,
// PEER_MARKS (completion counts to report, comma-separated).
// Stdout, one JSON object a line: {"ready":1} once the worker is connected;
// {"count":K,"t":NS} when the K-th job has completed (the 'completed' event, after
// BullMQ moved it to completed); {"late":NS,"i":I} for a delayed job, at the start of
// its processor: now - the time it was due. Times are CLOCK_MONOTONIC ns
// (process.hrtime), the clock Python's time.monotonic_ns() reads.
import { Worker } from 'bullmq';
import IORedis from 'ioredis';

const env = process.env;
const marks = new Set(env.PEER_MARKS.split(',').filter(Boolean).map(Number));
const now = () => Number(process.hrtime.bigint());
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const connection = new IORedis(env.PEER_URL, { maxRetriesPerRequest: null });
const worker = new Worker(env.PEER_QUEUE, async (job) => {
  const { i, due } = job.data;
  if (due) say({ late: now() - due, i });
}, { connection, concurrency: Number(env.PEER_CONCURRENCY) });

let completed = 0;
worker.on('completed', () => {
  completed += 1;
  if (marks.has(completed)) say({ count: completed, t: now() });
});
worker.on('failed', (job, err) => say({ failed: String(err) }));
worker.on('error', (err) => process.stderr.write(`worker error: ${err}\n`));

const stop = async () => {
  await worker.close();
  await connection.quit();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

await worker.waitUntilReady();
say({ ready: 1 });
