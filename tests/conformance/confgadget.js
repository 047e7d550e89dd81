'use strict';
// confgadget: the conformance suite's gadget on the JavaScript SDK, the
// twin of confgadget.c and confgadget.py (the same methods, signatures
// and answers).
const fs = require('fs');
const { Gadget, GadgetError } = require('@gadgetd/gadget');

class Conf extends Gadget {
  static signatures = {
    echo: 'echo(v: any) -> any',
    nop: 'nop()',
    greet: 'greet(name: string(..100), times?: int(1..10)) -> string',
    fail: 'fail(code: int, message: string)',
    crash: 'crash()',
    kvOps: 'kv() -> any',
    httpGet: 'http(url: string) -> {status: int, body: string}',
    slow: 'slow(url: string) -> string',
    peer: 'peer(method: string, args: any) -> any',
    alarmOps: 'alarms() -> any',
    ring: 'ring(binding: string, id: string, at: int, payload: any, attempt: int)',
    rung: 'rung() -> any',
    texts: 'texts() -> {text: string, secret: string}',
    logLine: 'log(text: string, level: int(0..7))',
    violate: 'violate()',
    nap: 'nap(ms: int(0..2000)) -> int',
  };

  echo({ v }) { return v; }

  nop() { return null; }

  greet({ name, times = 1 }) { return Array(times).fill('hello, ' + name).join(' '); }

  fail({ code, message }) { throw new GadgetError(code, message); }

  crash() { throw new Error('a method that fails without saying how'); }

  async kvOps() {
    const kv = this.kv('DATA');
    const r = {};
    try {
      await kv.get('a/1');
    } catch (e) {
      r.missing = e.code;
    }
    await kv.put('a/1', 1);
    await kv.put('a/2', { x: [1, 'two', null, true, 1.5, Buffer.from([0, 255])] });
    r.got = await kv.get('a/2');
    r.list = await kv.list({ prefix: 'a/', limit: 1 });
    r.cas_miss = await kv.cas('a/1', 2, 3);
    r.cas_hit = await kv.cas('a/1', 1, 5);
    r.batch = await kv.batch([{ op: 'put', key: 'b/1', value: true },
      { op: 'delete', key: 'a/2' },
      { op: 'cas', key: 'a/1', expect: 5, value: 6 }]);
    r.deleted = await kv.delete('a/1');
    r.deleted_again = await kv.delete('a/1');
    r.keys = await kv.list();
    return r;
  }

  async httpGet({ url }) {
    const resp = await this.http('WEB').get(url);
    return { status: resp.status, body: resp.body.toString('utf8') };
  }

  async slow({ url }) { return (await this.http('WEB').get(url)).body.toString('utf8'); }

  peer({ method, args }) { return this.gadget('PEER').call(method, args); }

  async alarmOps() {
    const clock = this.alarms('CLOCK');
    const r = { id: await clock.set({ delay: 3600000, payload: { n: 1 }, id: 'later' }) };
    const page = await clock.list();
    r.listed = page.alarms.map((a) => ({ id: a.id, payload: a.payload }));
    r.cancelled = await clock.cancel('later');
    r.cancelled_again = await clock.cancel('later');
    await clock.set({ delay: 0, payload: 'rang', id: 'now' });
    return r;
  }

  async ring({ id, payload, attempt }) {
    await this.kv('DATA').put('rung', { id, payload, attempt });
  }

  rung() { return this.kv('DATA').get('rung', null); }

  async texts() {
    return { text: await this.text('GREETING'), secret: await this.secret('TOKEN') };
  }

  logLine({ text, level }) { this.log(text, level); }

  violate() {
    // Breaks the protocol: a frame header announcing 4 GiB.
    fs.writeSync(Number(process.env.GADGET_FD || 3), Buffer.from([0xff, 0xff, 0xff, 0xff]));
  }

  // Sleeps, blocking the gadget; the naps started so far.
  nap({ ms }) {
    this.naps = (this.naps || 0) + 1;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    return this.naps;
  }
}

new Conf().run();
