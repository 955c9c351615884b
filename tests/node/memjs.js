// memjs.js <port>: memjs (npm's memcached client, binary protocol only)
// against leafd's memcached listener (run by
// tests/blackbox/bb_memcache_bin.py). Prints "ok" and the last demo ID
// ("last=<id>") when every check holds; any failure throws (exit 1).
'use strict';
const assert = require('node:assert');
const memjs = require('memjs');

async function main() {
  const port = Number(process.argv[2]);
  const client = memjs.Client.create('127.0.0.1:' + port,
                                     { retries: 0, timeout: 30, conntimeout: 30,
                                       logger: { log: () => {} } });
  const id = async (key) => {
    const { value, flags } = await client.get(key);
    assert.ok(value !== null, key + ' has a value');
    assert.deepStrictEqual([...flags], [0, 0, 0, 0], 'flags 0');
    return value.toString();
  };

  const a = BigInt(await id('demo'));
  const b = BigInt(await id('demo'));
  assert.ok(b > a, 'demo increases');
  assert.ok(BigInt(await id('@snowflake')) > (1n << 22n), 'a snowflake ID');
  assert.strictEqual((await id('@uuid')).length, 36, 'a UUID');
  assert.strictEqual((await id('@ulid')).length, 26, 'a ULID');

  // An unknown tag is a miss (status 0x0001): null, no error.
  assert.strictEqual((await client.get('nosuch')).value, null, 'a miss');
  // A bad tag: invalid arguments.
  await assert.rejects(client.get('bad/key'), /Invalid arguments/);

  // 500 gets in flight at once on one connection (memjs matches the answers
  // by opaque): every ID distinct, and those of demo increase.
  const many = await Promise.all(Array.from({ length: 500 },
    (_, i) => id(i % 2 ? 'demo' : '@snowflake')));
  assert.strictEqual(new Set(many).size, 500, 'no ID twice');
  const demo = many.filter((_, i) => i % 2).map(BigInt);
  demo.forEach((v, i) => { if (i > 0) assert.ok(v > demo[i - 1], 'in order'); });
  assert.ok(demo[0] > b, 'after the first gets');

  // Storage commands: refused with "Not supported", the connection kept.
  await assert.rejects(client.set('k', 'v', {}), /Not supported/);
  await assert.rejects(client.add('k', 'v', {}), /Not supported/);
  await assert.rejects(client.replace('k', 'v', {}), /Not supported/);
  await assert.rejects(client.delete('k'), /Not supported/);
  await assert.rejects(client.increment('demo', 1, {}), /Not supported/);
  await assert.rejects(client.decrement('demo', 1, {}), /Not supported/);
  await assert.rejects(client.append('k', 'v'), /Not supported/);
  await assert.rejects(client.prepend('k', 'v'), /Not supported/);
  await assert.rejects(client.touch('k', 10), /Not supported/);
  const last = BigInt(await id('demo'));
  assert.ok(last > demo[demo.length - 1], 'still served after the refusals');

  // stats: leafd's numbers under memcached's names.
  const stats = await new Promise((resolve, reject) => {
    client.stats((err, server, s) => (err ? reject(err) : resolve(s)));
  });
  assert.ok(Number(stats.pid) > 0 && stats.leafd_version, JSON.stringify(stats));
  assert.ok(Number(stats.get_hits) >= 505, 'hits: ' + stats.get_hits);

  client.close();
  console.log('ok last=' + last);
}

main().catch((e) => { console.error(e); process.exit(1); });
