// BullMQ's side of bench/scenarios/queue_groups.py: a burst of BURST jobs, then one
// "quiet" job, on a fresh queue; one Worker (concurrency 1, as the scenario's one
// Concord worker) runs no-op jobs until it has run the quiet one. BullMQ without
// groups (a BullMQ Pro feature) runs jobs in order, so the quiet job waits for the
// whole burst. Environment: PEER_URL, PEER_QUEUE, BURST.
// Prints one JSON object: {"before": jobs run before the quiet one, "wait_s": seconds
// from the quiet job's add to its start, "burst_s": seconds the burst took to add}.
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const env = process.env;
const burst = Number(env.BURST);
const now = () => Number(process.hrtime.bigint()) / 1e9;
const connection = new IORedis(env.PEER_URL, { maxRetriesPerRequest: null });
const queue = new Queue(env.PEER_QUEUE, { connection });
await queue.waitUntilReady();
const t0 = now();
for (let s = 0; s < burst; s += 1000) {
  const jobs = [];
  for (let i = s; i < Math.min(s + 1000, burst); i++) jobs.push({ name: 'noop', data: { i } });
  await queue.addBulk(jobs);
}
const added = now();
await queue.add('quiet', {});
let before = 0;
const done = new Promise((resolve) => {
  const worker = new Worker(env.PEER_QUEUE, async (job) => {
    if (job.name === 'quiet') {
      resolve({ before, wait_s: now() - added, burst_s: added - t0 });
      setImmediate(() => worker.close(true));
    } else {
      before += 1;
    }
  }, { connection: new IORedis(env.PEER_URL, { maxRetriesPerRequest: null }), concurrency: 1 });
});
process.stdout.write(JSON.stringify(await done) + '\n');
await queue.obliterate({ force: true });
process.exit(0);
