'use strict';
// @gadgetd/gadget: the JavaScript SDK for gadgetd's gadgets, on Node.js.
//
// A gadget is a class whose methods are its RPC surface, each named with
// its signature in gadgetd's type language (proto/README.md, "Method
// signatures") in the class's static `signatures`; gadgetd checks every
// call's arguments and every result against it:
//
//   const { Gadget } = require('@gadgetd/gadget');
//
//   class Counter extends Gadget {
//     static signatures = { increment: 'increment(by?: int) -> int' };
//     async increment({ by = 1 }) {
//       const n = (await this.kv('COUNT').get('count', 0)) + by;
//       await this.kv('COUNT').put('count', n);
//       return n;
//     }
//   }
//   new Counter().run();
//
// A method gets the call's arguments as one value (a record of the named
// parameters: an object) and answers with what it returns or resolves
// to. Binding calls are promises; while a method awaits one, other calls
// are served (calls and binding calls share the one connection, matched
// by id). Errors are GadgetError(code, message) with the contract's codes
// (ErrorCode, the table of proto/contract.c).
//
// No dependencies: the protocol's messages are encoded by hand (wire.js
// says why). The connection is the socket gadgetd hands the gadget as fd
// GADGET_FD (3), wrapped by net.Socket({fd}): libuv opens an inherited fd
// as a pipe handle (no socket() call, which the sandbox refuses) and
// reads and writes it with read, write and epoll like any other.
const net = require('net');
const wire = require('./wire');

const PROTOCOL_VERSION = 2;  // contract.h's GADGET_PROTOCOL_VERSION
const METHOD_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

// gadget.proto's ErrorCode: the numbers of proto/contract.c.
const ErrorCode = Object.freeze({
  INVALID: 1,        // invalid argument
  NO_METHOD: 2,      // no such method
  FAILED: 3,         // operation failed
  DENIED: 4,         // permission denied
  UNAVAILABLE: 5,    // the gadget is not running
  TIMEOUT: 6,        // no answer in time
  BUSY: 7,           // the gadget is busy: too many calls queued
  PROTOCOL: 8,       // protocol error
  LIMIT: 9,          // a size or quota limit was reached
  NOT_FOUND: 10,     // not found
  GONE: 11,          // the gadget ended during the call
  INTERNAL: 12,      // internal error in gadgetd
});
const CODE_NAMES = Object.fromEntries(Object.entries(ErrorCode).map(([k, v]) => [v, k]));

// An error answer: thrown by a method to answer its call with code (an
// ErrorCode number) and message; the rejection of a binding call that
// gadgetd answered with an error. Any other number reads as FAILED.
class GadgetError extends Error {
  constructor(code, message = '') {
    const c = CODE_NAMES[Number(code)] ? Number(code) : ErrorCode.FAILED;
    super(`${CODE_NAMES[c].toLowerCase()}: ${message}`);
    this.name = 'GadgetError';
    this.code = c;
    this.codeName = CODE_NAMES[c];
    this.detail = String(message);
  }
}

// A UTF-8 string cut to at most max bytes, at a character.
function cut(s, max) {
  s = String(s);
  const b = Buffer.from(s, 'utf8');   // lone surrogates as U+FFFD: valid UTF-8
  if (b.length <= max) return b.utf8Slice(0, b.length);
  let n = max;
  while (n > 0 && (b[n] & 0xC0) === 0x80) n--;
  return b.utf8Slice(0, n);
}

// The connection to gadgetd: frames in and out, binding calls in flight,
// calls being served.
class Conn {
  constructor(gadget, fd) {
    this.g = gadget;
    this.fd = fd;
    this.maxFrame = wire.MAX_FRAME;
    this.inbuf = null;            // reads not yet a whole frame (a list), their length,
    this.inlen = 0;               // and the length that makes one
    this.want = 0;
    this.nextId = 0;
    this.pending = new Map();     // binding call id -> {resolve, reject}
    this.serving = 0;             // calls started, not yet answered
    this.welcomed = false;
    this.stopping = false;
    this.ended = false;
    this.sock = new net.Socket({ fd, readable: true, writable: true });
    this.done = new Promise((resolve) => { this.finish = resolve; });
  }

  start(name, methods) {
    this.sock.on('data', (b) => this.onData(b));
    this.sock.on('end', () => this.end(0));          // gadgetd went away: a clean end
    this.sock.on('error', (e) => this.fail(e));
    this.send(wire.hello(name, PROTOCOL_VERSION, methods.map((m) => m[0]), methods.map((m) => m[1])));
  }

  send(frame) {
    if (!this.ended) this.sock.write(frame);   // gadgetd reads when it can; Node keeps the rest
  }

  onData(b) {
    // A large frame comes in many reads: they are joined once it is whole.
    if (this.inbuf) {
      this.inbuf.push(b);
      this.inlen += b.length;
      if (this.inlen < this.want) return;
      b = Buffer.concat(this.inbuf, this.inlen);
      this.inbuf = null;
    }
    const buf = b;
    let i = 0;
    while (buf.length - i >= wire.HEADER) {
      const n = buf.readUInt32LE(i);
      if (n > this.maxFrame) {
        this.fail(new wire.DecodeError(`a frame of ${n} bytes`));
        return;
      }
      if (buf.length - i - wire.HEADER < n) break;
      const f = buf.subarray(i + wire.HEADER, i + wire.HEADER + n);
      i += wire.HEADER + n;
      this.handle(f);
      if (this.ended) return;
    }
    if (i < buf.length) {
      const rest = Buffer.from(buf.subarray(i));   // a copy: buf may be a pooled read buffer
      this.inbuf = [rest];
      this.inlen = rest.length;
      this.want = rest.length >= wire.HEADER ? wire.HEADER + rest.readUInt32LE(0) : wire.HEADER;
    }
  }

  handle(f) {
    let m;
    try {
      m = wire.supervisorMsg(f);
    } catch (e) {
      this.fail(e);
      return;
    }
    if (!this.welcomed) {
      if (m.kind !== 'welcome') {
        this.fail(new wire.DecodeError('gadgetd did not welcome the gadget'));
        return;
      }
      this.welcomed = true;
      if (m.maxFrame >= 4096 && m.maxFrame < this.maxFrame) this.maxFrame = m.maxFrame;
      return;
    }
    if (m.kind === 'bindingResult') {
      const p = this.pending.get(m.id);
      if (p) {
        this.pending.delete(m.id);
        if (m.code) p.reject(new GadgetError(m.code, m.message));
        else p.resolve(m.value);
      }
    } else if (m.kind === 'call') {
      this.g._dispatch(this, m.id, m.method, m.args, m.deadlineUs);
    } else if (m.kind === 'shutdown') {
      this.stopping = true;
      this.maybeDone();
    }
    // a second welcome, or a message of a newer gadgetd: nothing waits for it
  }

  maybeDone() {
    if (this.stopping && this.serving === 0) this.end(0);
  }

  // The end: what was written leaves first, then status is the result.
  end(status) {
    if (this.ended) return;
    this.ended = true;
    for (const p of this.pending.values()) p.reject(new GadgetError(ErrorCode.UNAVAILABLE, 'the gadget is stopping'));
    this.pending.clear();
    if (this.sock.writable && !this.sock.destroyed) {
      this.sock.write(Buffer.alloc(0), () => this.finish(status));
    } else {
      this.finish(status);
    }
  }

  fail(e) {
    process.stderr.write(`gadget: connection to gadgetd failed: ${e && e.message}\n`);
    this.ended = true;
    this.sock.destroy();
    this.finish(1);
  }

  bindingCall(binding, op, args) {
    return new Promise((resolve, reject) => {
      if (this.ended) {
        reject(new GadgetError(ErrorCode.UNAVAILABLE, 'the gadget is not serving'));
        return;
      }
      const id = ++this.nextId;
      let frame;
      try {
        frame = wire.bindingCall(id, binding, op, wire.encodeValue(args === undefined ? null : args, 'args'));
      } catch (e) {
        if (!(e instanceof wire.EncodeError)) throw e;
        reject(new GadgetError(ErrorCode.INVALID, `${binding}.${op}: ${e.message}`));
        return;
      }
      if (frame.length > this.maxFrame) {
        // gadgetd would end the gadget for it (a protocol violation).
        reject(new GadgetError(ErrorCode.LIMIT,
          `${binding}.${op}: ${frame.length} bytes of arguments, over the frame limit`));
        return;
      }
      this.pending.set(id, { resolve, reject });
      this.send(frame);
    });
  }
}

const NO_DEFAULT = Symbol('no default');

class Binding {
  constructor(g, name) {
    this._g = g;
    this._name = name;
  }

  _call(op, args, dflt = NO_DEFAULT) {
    const p = this._g._connOrFail().bindingCall(this._name, op, args);
    if (dflt === NO_DEFAULT) return p;
    return p.catch((e) => {
      if (e instanceof GadgetError && e.code === ErrorCode.NOT_FOUND) return dflt;
      throw e;
    });
  }
}

function pick(o, keys) {
  const a = {};
  for (const k of keys) if (o[k] !== undefined && o[k] !== null) a[k] = o[k];
  return a;
}

// A kv binding (docs/bindings.md): keys are strings of 1 to 512 bytes.
class KV extends Binding {
  // The value stored under key; rejects with NOT_FOUND if none, unless a
  // default is given (then resolves to it).
  get(key, ...dflt) { return this._call('get', { key }, dflt.length ? dflt[0] : NO_DEFAULT); }

  // Stores value under key; durable once resolved.
  put(key, value) { return this._call('put', { key, value }); }

  // Whether the key existed.
  delete(key) { return this._call('delete', { key }); }

  // {keys: [...], cursor: K or null}; options {prefix, limit, cursor}.
  list(options = {}) { return this._call('list', pick(options, ['prefix', 'limit', 'cursor'])); }

  // Compare-and-set: writes value (null/undefined: deletes) only if the
  // stored value equals expect (null/undefined: only if the key does not
  // exist). {written, current (when not written and the key exists)}.
  cas(key, expect, value) { return this._call('cas', { key, ...pick({ expect, value }, ['expect', 'value']) }); }

  // ops: 1 to 64 {op: 'put'|'delete'|'cas', key, value?, expect?}, done
  // all or none. {applied: true, results} or {applied: false, failed, current?}.
  batch(ops) { return this._call('batch', { ops: [...ops] }); }
}

// An http binding: request() resolves to {status, headers, body: Buffer}.
class HTTP extends Binding {
  request(url, options = {}) {
    const a = { url, method: options.method || 'GET' };
    if (options.headers) a.headers = options.headers;
    if (options.body !== undefined && options.body !== null) {
      a.body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : options.body;
    }
    return this._call('request', a);
  }

  get(url, options = {}) { return this.request(url, { headers: options.headers }); }
}

// A gadget binding: call(method, args) on its target gadget.
class Peer extends Binding {
  call(method, args = null) { return this._call('call', { method, args }); }
}

// An alarm binding: gadgetd calls its Method= with {binding, id, at,
// payload, attempt} once an alarm is due.
class Alarms extends Binding {
  // {at: ms since the epoch} or {delay: ms from now}, payload?, id?: the alarm's id.
  set(options = {}) {
    const a = options.at !== undefined && options.at !== null ? { at: Math.trunc(options.at) }
      : { delay: Math.trunc(options.delay || 0) };
    if (options.payload !== undefined && options.payload !== null) a.payload = options.payload;
    if (options.id !== undefined && options.id !== null) a.id = options.id;
    return this._call('set', a);
  }

  list(options = {}) { return this._call('list', pick(options, ['limit', 'cursor'])); }

  // Whether there was such an alarm.
  cancel(id) { return this._call('cancel', { id }); }
}

// The base class of a gadget: its subclass's static signatures name its methods.
class Gadget {
  // name: the gadget's name; by default the one gadgetd gives (GADGET_NAME).
  constructor(name) {
    this.name = name !== undefined && name !== null ? String(name) : (process.env.GADGET_NAME || '');
    this._conn = null;
    this._methods = new Map();   // method name -> [JS function name, signature or null]
    const classes = [];
    for (let c = this.constructor; c && c !== Gadget && c !== Object; c = Object.getPrototypeOf(c)) classes.unshift(c);
    for (const c of classes) {
      if (!Object.prototype.hasOwnProperty.call(c, 'signatures')) continue;
      for (const [fname, sig] of Object.entries(c.signatures || {})) {
        if (fname in Gadget.prototype) {
          throw new Error(`method ${fname} hides Gadget's own: name the JavaScript method otherwise ` +
                          '(the signature names the gadget\'s method)');
        }
        if (typeof this[fname] !== 'function') throw new Error(`signatures names ${fname}, which is no method`);
        if (sig !== null && typeof sig !== 'string') throw new Error(`the signature of ${fname} is no string`);
        const mname = sig ? sig.trim().split(/[(\s]/, 1)[0] : fname;
        if (!METHOD_NAME.test(mname)) throw new Error(`not a valid method name: ${JSON.stringify(mname)}`);
        this._methods.delete(mname);   // a subclass's replaces, in its own place
        this._methods.set(mname, [fname, sig || null]);
      }
    }
  }

  // --- bindings ---
  kv(binding) { return new KV(this, binding); }

  http(binding) { return new HTTP(this, binding); }

  gadget(binding) { return new Peer(this, binding); }

  alarms(binding) { return new Alarms(this, binding); }

  // A text binding's value (a string).
  text(binding) { return new Binding(this, binding)._call('get', null); }

  // A secret binding's value, the same operation.
  secret(binding) { return this.text(binding); }

  // Any operation of any binding (docs/bindings.md).
  bindingCall(binding, op, args = null) { return new Binding(this, binding)._call(op, args); }

  // A log line for gadgetd (syslog priority 0..7, default 6), sent at once.
  log(text, level = 6) {
    const l = Math.max(0, Math.min(7, Math.trunc(Number(level)) || 0));
    // At most 4095 bytes, cut at a character, as libgadget's gadget_log.
    this._connOrFail().send(wire.log(l, cut(String(text), 4095)));
  }

  _connOrFail() {
    if (!this._conn || this._conn.ended) throw new GadgetError(ErrorCode.UNAVAILABLE, 'the gadget is not serving');
    return this._conn;
  }

  // --- serving ---
  _dispatch(conn, id, name, args, deadlineUs = 0) {
    const entry = this._methods.get(name);
    if (!entry) {
      conn.send(wire.callResult(id, null, ErrorCode.NO_METHOD, `no method "${cut(name, 400)}"`));
      return;
    }
    // Its caller may have been answered already: a call never starts after
    // that (gadget.proto, Call.deadline_us; process.hrtime is CLOCK_MONOTONIC).
    if (deadlineUs && Number(process.hrtime.bigint() / 1000n) > deadlineUs) {
      conn.send(wire.callResult(id, null, ErrorCode.TIMEOUT, `${cut(name, 400)}: not run: read after its deadline`));
      return;
    }
    conn.serving++;
    let r;
    try {
      r = this[entry[0]](args);
    } catch (e) {
      this._answer(conn, id, name, undefined, e);
      return;
    }
    if (r && typeof r.then === 'function') {
      Promise.resolve(r).then((v) => this._answer(conn, id, name, v, null),
        (e) => this._answer(conn, id, name, undefined, e === null || e === undefined ? new Error(String(e)) : e));
    } else {
      this._answer(conn, id, name, r, null);
    }
  }

  _answer(conn, id, name, result, exc) {
    conn.serving--;
    let code = 0;
    let message = '';
    let packed = null;
    if (!exc) {
      try {
        packed = wire.encodeValue(result === undefined ? null : result, 'result');
      } catch (e) {   // no gadget value (or one too deep for the stack)
        code = ErrorCode.FAILED;
        message = `${name}: ${e.message}`;
      }
      if (packed && packed.length + 32 > conn.maxFrame) {
        code = ErrorCode.LIMIT;
        message = `${name}: a result of ${packed.length} bytes is over the frame limit`;
        packed = null;
      }
    } else if (exc instanceof GadgetError) {
      code = exc.code;
      message = exc.detail;
    } else {
      process.stderr.write(`${(exc && exc.stack) || exc}\n`);
      code = ErrorCode.FAILED;
      message = `method "${name}" failed: ${(exc && exc.name) || 'Error'}: ${(exc && exc.message) || exc}`;
    }
    // At most 511 bytes, cut at a character, as libgadget's messages.
    conn.send(wire.callResult(id, packed, code, packed ? '' : cut(message, 511)));
    conn.maybeDone();
  }

  // Says hello and serves calls until gadgetd asks the gadget to stop;
  // calls already started then finish and are answered (drain). Resolves
  // to 0 then, 1 if the connection failed.
  async serve() {
    const fd = Number(process.env.GADGET_FD || 3);
    const conn = new Conn(this, fd);
    this._conn = conn;
    conn.start(this.name, [...this._methods].map(([m, [, sig]]) => [m, sig]));
    const status = await conn.done;
    this._conn = null;
    return status;
  }

  // serve(), then exit with its status.
  run() {
    this.serve().then((status) => process.exit(status), (e) => {
      process.stderr.write(`gadget: ${(e && e.stack) || e}\n`);
      process.exit(1);
    });
  }
}

module.exports = { Gadget, GadgetError, ErrorCode, Double: wire.Double, KV, HTTP, Peer, Alarms, PROTOCOL_VERSION };
