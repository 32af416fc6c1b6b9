// A tour of what a node program does besides computing: timers, the file
// system (libuv's thread pool), a child process, a loopback HTTP exchange,
// zlib and crypto on the thread pool, worker threads (each an isolate and
// an event loop of its own on a thread of its own). Prints only deterministic facts; its
// exit status is 0 when every step ran.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const http = require('http');
const zlib = require('zlib');
const crypto = require('crypto');
const { execFile, spawnSync } = require('child_process');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

const steps = [];
const log = (line) => { steps.push(line); console.log(line); };

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

async function timers() {
  // Two orders node guarantees: a nextTick before an immediate, and timers
  // by their expiry. (An immediate against a 5 ms timer is not one: a main
  // module that reaches the loop more than 5 ms late, on a loaded machine,
  // runs the timer first, with or without greenhook.)
  const order = [];
  const timed = [];
  setTimeout(() => timed.push('timeout 20'), 20);
  setTimeout(() => timed.push('timeout 5'), 5);
  setImmediate(() => order.push('immediate'));
  process.nextTick(() => order.push('nextTick'));
  let ticks = 0;
  const every = setInterval(() => { ticks += 1; }, 2);
  const t0 = Date.now();
  await sleep(50);
  clearInterval(every);
  const waited = Date.now() - t0;
  log(`timers: ${order.join(', ')}; ${timed.join(', ')}; interval ticked ${ticks >= 5 ? 'at least 5 times' : `only ${ticks} times`}; sleep(50) ${waited >= 49 ? 'not early' : `EARLY (${waited} ms)`}`);
}

async function files() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'greenhook-node-'));
  try {
    const big = Buffer.alloc(1 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
    await fs.promises.writeFile(path.join(dir, 'big'), big);
    const names = Array.from({ length: 50 }, (_, i) => `f${i}`);
    await Promise.all(names.map((n, i) => fs.promises.writeFile(path.join(dir, n), `file ${i}\n`)));
    const back = await fs.promises.readFile(path.join(dir, 'big'));
    const texts = await Promise.all(names.map((n) => fs.promises.readFile(path.join(dir, n), 'utf8')));
    const listed = (await fs.promises.readdir(dir)).length;
    const viaCallback = await new Promise((resolve, reject) =>
      fs.readFile(path.join(dir, 'f7'), 'utf8', (err, data) => (err ? reject(err) : resolve(data))));
    const st = fs.statSync(path.join(dir, 'big'));
    log(`fs: 1 MiB file read back ${back.equals(big) ? 'equal' : 'DIFFERENT'}, ` +
        `${texts.every((t, i) => t === `file ${i}\n`) ? '50 small files equal' : 'small files DIFFERENT'}, ` +
        `readdir ${listed} entries, callback read ${JSON.stringify(viaCallback)}, stat size ${st.size}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function children() {
  const out = await new Promise((resolve, reject) =>
    execFile(process.execPath, ['-e', 'setTimeout(() => { console.log("child says hi"); process.exit(3); }, 10)'],
      (err, stdout) => (err && err.code !== 3 ? reject(err) : resolve(`${stdout.trim()} (exit ${err ? err.code : 0})`))));
  const sh = spawnSync('/bin/sh', ['-c', 'read line; echo "sh read: $line"; exit 4'], { input: 'from node\n' });
  log(`child: ${out}; ${sh.stdout.toString().trim()} (exit ${sh.status})`);
}

async function loopbackHttp() {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { res.end(`${req.method} ${req.url} ${body.length}`); });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const one = (i) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `/r${i}` }, (res) => {
      let data = '';
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve(data));
    });
    req.on('error', reject);
    req.end('x'.repeat(i * 100));
  });
  const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => one(i)));
  server.close();
  const good = replies.every((r, i) => r === `POST /r${i} ${i * 100}`);
  log(`http: 20 loopback requests, replies ${good ? 'all correct' : `WRONG: ${replies.join('|')}`}`);
}

async function pool() {
  const data = Buffer.from('greenhook '.repeat(10000));
  const packed = await new Promise((resolve, reject) => zlib.gzip(data, (e, r) => (e ? reject(e) : resolve(r))));
  const unpacked = await new Promise((resolve, reject) => zlib.gunzip(packed, (e, r) => (e ? reject(e) : resolve(r))));
  const key = await new Promise((resolve, reject) =>
    crypto.pbkdf2('secret', 'salt', 1000, 16, 'sha256', (e, k) => (e ? reject(e) : resolve(k))));
  log(`pool: gzip round trip ${unpacked.equals(data) ? 'equal' : 'DIFFERENT'}, pbkdf2 ${key.toString('hex')}`);
}

// A worker's body: answers numbers with a sum of squares; with a shared
// buffer, also plays its side of an Atomics.wait/notify ping-pong.
const WORKER = `
const { parentPort, workerData } = require('worker_threads');
if (workerData.sab) {
  const a = new Int32Array(workerData.sab);
  for (let i = 0; i < workerData.turns; i++) {
    while (Atomics.load(a, 0) !== 1) Atomics.wait(a, 0, 0, 1000);
    Atomics.store(a, 2, Atomics.load(a, 2) + Atomics.load(a, 1));
    Atomics.store(a, 0, 0);
    Atomics.notify(a, 0);
  }
}
parentPort.on('message', (m) => {
  if (m === null) { parentPort.close(); return; }
  let s = 0;
  for (let i = 0; i < m; i++) s = (s + i * i) % 1000003;
  parentPort.postMessage(s);
});
`;

async function workers() {
  // Four workers at once, each with its own isolate, answering 50 messages.
  const sums = await Promise.all(Array.from({ length: 4 }, (_, k) => new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { eval: true, workerData: {} });
    const got = [];
    w.on('message', (v) => {
      got.push(v);
      w.postMessage(got.length === 50 ? null : 1000 * (got.length + k));
    });
    w.on('error', reject);
    w.on('exit', (code) => resolve(`${got.reduce((p, q) => (p + q) % 1000003, 0)}/${code}`));
    w.postMessage(1000 * k);
  })));
  // The main thread and a worker hand a turn back and forth 1,000 times
  // through a SharedArrayBuffer (Atomics.wait is a futex wait).
  const turns = 1000;
  const a = new Int32Array(new SharedArrayBuffer(12));
  const w = new Worker(WORKER, { eval: true, workerData: { sab: a.buffer, turns } });
  const exited = new Promise((resolve, reject) => { w.on('exit', resolve); w.on('error', reject); });
  for (let i = 1; i <= turns; i++) {
    while (Atomics.load(a, 0) !== 0) Atomics.wait(a, 0, 1, 1000);
    Atomics.store(a, 1, i);
    Atomics.store(a, 0, 1);
    Atomics.notify(a, 0);
  }
  while (Atomics.load(a, 0) !== 0) Atomics.wait(a, 0, 1, 1000);
  w.postMessage(null);
  const code = await exited;
  // The main thread waits for a worker's store by spinning on
  // Atomics.load, calling nothing: compiled code without unwind tables,
  // which must be preempted for the worker to run at all.
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const setter = new Worker(`const { workerData } = require('worker_threads');
setTimeout(() => Atomics.store(new Int32Array(workerData), 0, 1), 50);`, { eval: true, workerData: flag.buffer });
  const setterExited = new Promise((resolve, reject) => { setter.on('exit', resolve); setter.on('error', reject); });
  while (Atomics.load(flag, 0) === 0);
  const setterCode = await setterExited;
  log(`workers: 4 at once, sums/exit ${sums.join(' ')}; Atomics ping-pong ${turns} turns, total ${Atomics.load(a, 2)}, exit ${code}; a spin on the main thread saw a worker's store, exit ${setterCode}`);
}

(async () => {
  await timers();
  await files();
  await children();
  await loopbackHttp();
  await pool();
  await workers();
  log(`done: ${steps.length} steps`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
