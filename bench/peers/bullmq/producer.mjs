// BullMQ's producer for bench/scenarios/peers_queue.py: a Queue; no-op jobs added with
// Queue.addBulk in batches, delayed ones with Queue.add(name, data, { delay }).
// Environment: PEER_URL, PEER_QUEUE. Commands on stdin, one JSON object a line:
//   {"cmd":"bulk","start":S,"n":N,"batch":B}   jobs S..S+N-1, B per addBulk
//   {"cmd":"delayed","delays_ms":[...],"gap_ms":G}   one job per delay, G ms apart,
//       each carrying due = now + delay (CLOCK_MONOTONIC ns, read before the call)
// Each answered with {"sent":N,"t0":NS,"t1":NS} (before the first call, after the last).
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

const env = process.env;
const now = () => Number(process.hrtime.bigint());
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const connection = new IORedis(env.PEER_URL, { maxRetriesPerRequest: null });
const queue = new Queue(env.PEER_QUEUE, { connection });
await queue.waitUntilReady();
say({ ready: 1 });

for await (const line of readline.createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  const t0 = now();
  let sent = 0;
  if (cmd.cmd === 'bulk') {
    const end = cmd.start + cmd.n;
    for (let s = cmd.start; s < end; s += cmd.batch) {
      const jobs = [];
      for (let i = s; i < Math.min(s + cmd.batch, end); i++) jobs.push({ name: 'noop', data: { i, due: 0 } });
      await queue.addBulk(jobs);
      sent += jobs.length;
    }
  } else if (cmd.cmd === 'delayed') {
    for (const [i, delay] of cmd.delays_ms.entries()) {
      const due = now() + delay * 1e6;
      await queue.add('noop', { i, due }, { delay });
      sent += 1;
      await sleep(cmd.gap_ms);
    }
  }
  say({ sent, t0, t1: now() });
}
await queue.close();
await connection.quit();
