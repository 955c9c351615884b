// multi.js <port>: node-redis's multi() against leafd's RESP listener
// (run by tests/blackbox/bb_resp_multi.py). Prints "ok" when every check
// holds; any failure throws (exit 1).
'use strict';
const assert = require('node:assert');
const { createClient } = require('redis');

async function main() {
  const port = Number(process.argv[2]);
  const client = createClient({ socket: { host: '127.0.0.1', port } });
  client.on('error', (e) => { console.error('client error:', e); });
  await client.connect();

  // A transaction: MULTI, INCR x 10, LEAF.SEGMENT demo 3, PING, EXEC.
  let m = client.multi();
  for (let i = 0; i < 10; i++) m = m.incr('demo');
  const res = await m.addCommand(['LEAF.SEGMENT', 'demo', '3']).ping().exec();
  assert.strictEqual(res.length, 12);
  const ids = res.slice(0, 10);
  ids.forEach((v, i) => { if (i > 0) assert.ok(v > ids[i - 1], 'increasing'); });
  assert.deepStrictEqual(res[10].map(Number), [ids[9] + 1, ids[9] + 2, ids[9] + 3]);
  assert.strictEqual(res[11], 'PONG');

  // A refused command aborts EXEC and takes no ID.
  const before = await client.incr('demo');
  await assert.rejects(client.multi().incr('demo').incr('bad/tag').exec(),
                       (e) => /EXECABORT|INVALID_BIZ_TAG/.test(String(e) + JSON.stringify(e)));
  assert.strictEqual(await client.incr('demo'), before + 1, 'no ID taken');

  // WATCH, then a transaction: it runs (leafd's WATCH never fails EXEC).
  await client.watch('demo');
  const w = await client.multi().incr('demo').exec();
  assert.deepStrictEqual(w, [before + 2]);

  // A pipeline without MULTI.
  const p = await client.multi().incr('demo').incr('demo').execAsPipeline();
  assert.deepStrictEqual(p, [before + 3, before + 4]);

  const info = await client.info('server');
  assert.match(info, /redis_version:7\.\d+\.\d+/);
  await client.quit();
  console.log('ok');
}

main().catch((e) => { console.error(e); process.exit(1); });
