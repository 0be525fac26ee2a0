// Enqueues tasks for any worker, in any language, to consume: one task per JSON
// argument, as its payload (what the Python Worker's task.json() reads), in one
// atomic batch. Prints the task ids, one a line.
//
//   node examples/producer.js --addr 127.0.0.1:50051 email send_welcome '{"to": "ada@example.com"}'
import { parseArgs } from 'node:util';
import { Client, errorInfo } from '../src/index.js';

const { values, positionals } = parseArgs({
  options: { addr: { type: 'string', default: '127.0.0.1:50051' } },
  allowPositionals: true,
});
const [queue, type, ...payloads] = positionals;
if (!queue || !type || payloads.length === 0) {
  console.error('usage: producer.js [--addr HOST:PORT] QUEUE TYPE JSON...');
  process.exit(2);
}

const client = new Client(values.addr);
try {
  const tasks = payloads.map((json) => ({ type, payload: Buffer.from(JSON.stringify(JSON.parse(json))) }));
  const { results } = await client.queue.enqueue({ queue, tasks }, { deadline: Date.now() + 10_000 });
  for (const { taskId } of results) console.log(taskId);
} catch (err) {
  console.error(`enqueue failed: ${err.message}`, errorInfo(err) ?? '');
  process.exitCode = 1;
} finally {
  client.close();
}
