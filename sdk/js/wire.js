'use strict';
// The gadget protocol's frames and messages (proto/gadget.proto), encoded
// and decoded by hand: a gadget's messages are eight small ones and a
// recursive Value, about 300 lines here, with no package to install, no
// generated code to keep in step with gadget.proto, and a Value decoded
// straight into JavaScript values. Only what gadget.proto says is read;
// unknown fields are skipped as protobuf requires.
//
// Values: null (undefined too, when sent), boolean, number, bigint,
// string, bytes (any Uint8Array; a Buffer when received), Array, and
// plain objects (or a Map with string keys). A number is sent as an int
// when it is an integer within 2^53 (and not -0), else as a double; wrap
// one in Double to send a whole number as a double. An int received is a
// number when it fits in one exactly (|n| < 2^53), else a bigint.

const HEADER = 4;            // a frame: u32 length, little-endian (proto/wire.h)
const MAX_FRAME = 2 << 20;   // WIRE_MAX_FRAME, unless the welcome says less
const MAX_DEPTH = 32;        // VALUE_MAX_DEPTH (proto/value.h)
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const SAFE = Number.MAX_SAFE_INTEGER;

class DecodeError extends Error {}
class EncodeError extends Error {}  // a JavaScript value that is no gadget value (its path and why)

// A number to be sent as a double even when it is whole.
class Double {
  constructor(v) { this.value = Number(v); }
}

// --- encoding ---------------------------------------------------------------
// Two passes: sizes() walks the value once and notes, in visiting order,
// the byte length of every string and list or map; put() writes it into a
// buffer of the exact size, taking the lengths in the same order. No part
// is copied twice, and every length prefix is known when it is written.

function varintSize(n) {   // n: a number < 2^53 or a bigint < 2^64
  if (typeof n === 'bigint') {
    let s = 1;
    while (n > 0x7Fn) { n >>= 7n; s++; }
    return s;
  }
  let s = 1;
  while (n > 0x7F) { n = Math.floor(n / 128); s++; }
  return s;
}

function zigzag(v) {       // an int (number or bigint) as its sint64 varint value
  if (typeof v === 'number') {
    if (v >= 0 && v <= 2 ** 52) return v * 2;
    if (v < 0 && v >= -(2 ** 52)) return -v * 2 - 1;
    v = BigInt(v);
  }
  return v >= 0n ? v << 1n : ((-v) << 1n) - 1n;
}

function isInt(v) {
  return Number.isInteger(v) && Math.abs(v) <= SAFE && !Object.is(v, -0);
}

// A map's entries, those whose value is undefined left out (as JSON does).
function entriesOf(v) {
  const all = v instanceof Map ? [...v.entries()] : Object.entries(v);
  return all.some((e) => e[1] === undefined) ? all.filter((e) => e[1] !== undefined) : all;
}

// Whether s is valid UTF-16 (no lone surrogate), so valid UTF-8 once
// encoded: String.prototype.isWellFormed where Node has it (20), else a
// regular expression (with /u, a pair is one code point, never a match).
const LONE_SURROGATE = /\p{Surrogate}/u;
function wellFormedString(s) {
  return s.isWellFormed ? s.isWellFormed() : !LONE_SURROGATE.test(s);
}

function isPlain(v) {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

// The size of the Value v's own encoding (its fields, no key or length of
// its own); lens gets the lengths put() needs.
function sizes(v, lens, depth, path) {
  if (v === null || v === undefined || typeof v === 'boolean') return 2;
  switch (typeof v) {
    case 'number':
      if (isInt(v)) return 1 + varintSize(zigzag(v));
      return 9;
    case 'bigint':
      if (v < INT64_MIN || v > INT64_MAX) throw new EncodeError(`${path}: ${v} is beyond a 64-bit int`);
      return 1 + varintSize(zigzag(v));
    case 'string': {
      if (!wellFormedString(v)) throw new EncodeError(`${path}: a string with a lone surrogate`);
      const n = Buffer.byteLength(v, 'utf8');
      lens.push(n);
      return 1 + varintSize(n) + n;
    }
  }
  if (v instanceof Double) return 9;
  if (v instanceof Uint8Array) return 1 + varintSize(v.length) + v.length;
  if (Array.isArray(v) || v instanceof Map || (typeof v === 'object' && isPlain(v))) {
    if (depth > MAX_DEPTH) throw new EncodeError(`${path}: lists and maps nested deeper than ${MAX_DEPTH}`);
    const at = lens.length;
    lens.push(0);
    let n = 0;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const s = sizes(v[i], lens, depth + 1, `${path}[${i}]`);
        n += 1 + varintSize(s) + s;     // List.items (1): a Value
      }
    } else {
      const entries = entriesOf(v);
      for (const [k, x] of entries) {
        if (typeof k !== 'string') throw new EncodeError(`${path}: a map key is not a string: ${String(k)}`);
        const et = lens.length;
        lens.push(0);                               // the entry's length, known below
        const ks = sizes(k, lens, depth, path);     // MapEntry.key (1), as a string's
        const xs = sizes(x, lens, depth + 1, `${path}.${k}`);
        const e = ks + 1 + varintSize(xs) + xs;     // the key's field, then the value's (2)
        lens[et] = e;
        n += 1 + varintSize(e) + e;                 // Map.entries (1)
      }
    }
    lens[at] = n;
    return 1 + varintSize(n) + n;
  }
  const what = typeof v === 'object' ? (v.constructor && v.constructor.name) || 'object' : typeof v;
  throw new EncodeError(`${path}: a ${what} is no gadget value`);
}

class Out {
  constructor(n) {
    this.b = Buffer.allocUnsafe(n);
    this.i = 0;
    this.lens = null;
    this.li = 0;
  }

  byte(c) { this.b[this.i++] = c; }

  varint(n) {
    if (typeof n === 'bigint') {
      while (n > 0x7Fn) { this.b[this.i++] = Number(n & 0x7Fn) | 0x80; n >>= 7n; }
      this.b[this.i++] = Number(n);
      return;
    }
    while (n > 0x7F) { this.b[this.i++] = (n % 128) | 0x80; n = Math.floor(n / 128); }
    this.b[this.i++] = n;
  }

  bytes(field, src) { this.byte(field << 3 | 2); this.varint(src.length); this.b.set(src, this.i); this.i += src.length; }

  str(field, s, n) { this.byte(field << 3 | 2); this.varint(n); this.i += this.b.utf8Write(s, this.i, n); }

  value(v) {
    if (v === null || v === undefined) { this.byte(1 << 3); this.byte(1); return; }
    switch (typeof v) {
      case 'boolean': this.byte(2 << 3); this.byte(v ? 1 : 0); return;
      case 'number':
        if (isInt(v)) { this.byte(3 << 3); this.varint(zigzag(v)); return; }
        this.byte(4 << 3 | 1); this.b.writeDoubleLE(v, this.i); this.i += 8; return;
      case 'bigint': this.byte(3 << 3); this.varint(zigzag(v)); return;
      case 'string': this.str(5, v, this.lens[this.li++]); return;
    }
    if (v instanceof Double) { this.byte(4 << 3 | 1); this.b.writeDoubleLE(v.value, this.i); this.i += 8; return; }
    if (v instanceof Uint8Array) { this.bytes(6, v); return; }
    const n = this.lens[this.li++];
    if (Array.isArray(v)) {
      this.byte(7 << 3 | 2); this.varint(n);
      for (const x of v) this.nested(1, x);
      return;
    }
    this.byte(8 << 3 | 2); this.varint(n);
    const entries = entriesOf(v);
    for (const [k, x] of entries) {
      this.byte(1 << 3 | 2); this.varint(this.lens[this.li++]);
      this.byte(1 << 3 | 2);
      const kn = this.lens[this.li++];
      this.varint(kn);
      this.i += this.b.utf8Write(k, this.i, kn);
      this.nested(2, x);
    }
  }

  // A Value in field f of a List or MapEntry: key, length, the value.
  nested(f, x) {
    this.byte(f << 3 | 2);
    this.varint(valueSize(x, this.lens, this.li));
    this.value(x);
  }
}

// The size of x's own encoding, from the lengths sizes() noted at lens[at].
function valueSize(x, lens, at) {
  if (x === null || x === undefined || typeof x === 'boolean') return 2;
  switch (typeof x) {
    case 'number': return isInt(x) ? 1 + varintSize(zigzag(x)) : 9;
    case 'bigint': return 1 + varintSize(zigzag(x));
    case 'string': return 1 + varintSize(lens[at]) + lens[at];
  }
  if (x instanceof Double) return 9;
  if (x instanceof Uint8Array) return 1 + varintSize(x.length) + x.length;
  return 1 + varintSize(lens[at]) + lens[at];
}

// A value as the bytes of a packed gadget.Value (its fields).
function encodeValue(v, path = 'value') {
  const lens = [];
  const n = sizes(v, lens, 1, path);
  const o = new Out(n);
  o.lens = lens;
  o.value(v);
  return o.b;
}

// --- the messages gadgets send ------------------------------------------------

// A message of fields, each [field, kind, x]: 'v' varint (omitted when 0),
// 's' string (omitted when empty), 'S' a repeated string's item (always
// there: an untyped method's empty signature keeps its place), 'b' bytes,
// 'm' a nested message (an array of such fields).
function msgSize(fields) {
  let n = 0;
  for (const f of fields) {
    const [, kind, x] = f;
    if (kind === 'v') {
      if (x) n += 1 + varintSize(x);
    } else if (kind === 's' || kind === 'S') {
      if (x || kind === 'S') { f[3] = Buffer.byteLength(x, 'utf8'); n += 1 + varintSize(f[3]) + f[3]; }
    } else if (kind === 'b') {
      n += 1 + varintSize(x.length) + x.length;
    } else {
      f[3] = msgSize(x);
      n += 1 + varintSize(f[3]) + f[3];
    }
  }
  return n;
}

function msgPut(o, fields) {
  for (const [field, kind, x, n] of fields) {
    if (kind === 'v') {
      if (x) { o.byte(field << 3); o.varint(x); }
    } else if (kind === 's' || kind === 'S') {
      if (x || kind === 'S') o.str(field, x, n);
    } else if (kind === 'b') {
      o.bytes(field, x);
    } else {
      o.byte(field << 3 | 2); o.varint(n); msgPut(o, x);
    }
  }
}

// A WorkerMsg as one frame: its u32 length, then the message.
function frame(fields) {
  const n = msgSize(fields);
  const o = new Out(HEADER + n);
  o.b.writeUInt32LE(n, 0);
  o.i = HEADER;
  msgPut(o, fields);
  return o.b;
}

// A name or message as valid UTF-8 whatever string it was (lone surrogates as U+FFFD).
function wellFormed(s) {
  return wellFormedString(s) ? s : s.replace(/\p{Surrogate}/gu, '\uFFFD');
}

function hello(name, version, methods, signatures) {
  return frame([[1, 'm', [[1, 's', wellFormed(name)], [2, 'v', version],
    ...methods.map((m) => [3, 'S', m]), ...signatures.map((s) => [4, 'S', wellFormed(s || '')])]]]);
}

function callResult(id, valueBytes, code, message) {
  const body = [[1, 'v', id]];
  if (valueBytes) body.push([2, 'b', valueBytes]);
  else body.push([3, 'm', [[1, 'v', code], [2, 's', wellFormed(message)]]]);
  return frame([[2, 'm', body]]);
}

function bindingCall(id, binding, op, argsBytes) {
  return frame([[3, 'm', [[1, 'v', id], [2, 's', wellFormed(binding)], [3, 's', wellFormed(op)], [4, 'b', argsBytes]]]]);
}

function log(level, text) {
  return frame([[4, 'm', [[1, 'v', level], [2, 's', text]]]]);
}

// --- decoding ---------------------------------------------------------------

// A varint at b[i..end): [value, next i]; a number below 2^53, else a bigint.
function readVarint(b, i, end) {
  let n = 0;
  let mul = 1;
  for (let k = 0; k < 7; k++) {   // 49 bits: exact in a number
    if (i >= end) throw new DecodeError('bad varint');
    const c = b[i++];
    n += (c & 0x7F) * mul;
    if (c < 0x80) return [n, i];
    mul *= 128;
  }
  let big = BigInt(n);
  let shift = 49n;
  for (;;) {
    if (i >= end || shift > 63n) throw new DecodeError('bad varint');
    const c = b[i++];
    big |= BigInt(c & 0x7F) << shift;
    if (c < 0x80) break;
    shift += 7n;
  }
  big &= (1n << 64n) - 1n;
  return [big <= BigInt(SAFE) ? Number(big) : big, i];
}

// Calls fn(field, wire type, value, start, end) for each field of
// b[i..end): value a number or bigint for varints, the offset for fixed
// ones, and for length-delimited ones the span [start, end).
function fields(b, i, end, fn) {
  while (i < end) {
    let k = b[i];
    if (k < 0x80) i++;
    else [k, i] = readVarint(b, i, end);
    if (typeof k !== 'number') throw new DecodeError('a field number beyond 2^53');
    const f = Math.floor(k / 8);
    const wt = k & 7;
    if (wt === 0) {
      let v;
      [v, i] = readVarint(b, i, end);
      fn(f, wt, v, 0, 0);
    } else if (wt === 2) {
      let n = i < end ? b[i] : 0x80;
      if (n < 0x80) i++;
      else [n, i] = readVarint(b, i, end);
      if (typeof n !== 'number' || i + n > end) throw new DecodeError('a field runs past its message');
      fn(f, wt, 0, i, i + n);
      i += n;
    } else if (wt === 1) {
      if (i + 8 > end) throw new DecodeError('a short fixed64');
      fn(f, wt, i, 0, 0);
      i += 8;
    } else if (wt === 5) {
      if (i + 4 > end) throw new DecodeError('a short fixed32');
      fn(f, wt, i, 0, 0);
      i += 4;
    } else {
      throw new DecodeError(`wire type ${wt}`);
    }
  }
}

function unzigzag(v) {
  if (typeof v === 'number') return v % 2 ? -(v + 1) / 2 : v / 2;
  const r = (v >> 1n) ^ -(v & 1n);
  return r >= -BigInt(SAFE) && r <= BigInt(SAFE) ? Number(r) : r;
}

const UNSET = Symbol('unset');

// A packed gadget.Value at b[i..end) as JavaScript (see the top).
function decodeValue(b, i, end, depth = 1) {
  if (depth > MAX_DEPTH + 1) throw new DecodeError('a value nested too deeply');
  let out = UNSET;
  fields(b, i, end, (f, wt, v, s, e) => {
    if (f === 1 && wt === 0) out = null;
    else if (f === 2 && wt === 0) out = v !== 0;
    else if (f === 3 && wt === 0) out = unzigzag(v);
    else if (f === 4 && wt === 1) out = b.readDoubleLE(v);
    else if (f === 5 && wt === 2) out = b.utf8Slice(s, e);
    else if (f === 6 && wt === 2) out = Buffer.from(b.subarray(s, e));
    else if (f === 7 && wt === 2) {
      const list = [];
      fields(b, s, e, (lf, lw, lv, ls, le) => {
        if (lf === 1 && lw === 2) list.push(decodeValue(b, ls, le, depth + 1));
      });
      out = list;
    } else if (f === 8 && wt === 2) {
      const map = {};
      fields(b, s, e, (mf, mw, mv, ms, me) => {
        if (mf !== 1 || mw !== 2) return;
        let key = '';
        let val = null;
        fields(b, ms, me, (ef, ew, ev, es, ee) => {
          if (ef === 1 && ew === 2) key = b.utf8Slice(es, ee);
          else if (ef === 2 && ew === 2) val = decodeValue(b, es, ee, depth + 1);
        });
        if (key === '__proto__') {   // an own property, never the object's prototype
          Object.defineProperty(map, key, { value: val, enumerable: true, writable: true, configurable: true });
        } else {
          map[key] = val;
        }
      });
      out = map;
    }
  });
  if (out === UNSET) throw new DecodeError('a value with no kind');
  return out;
}

// [id, value, code, message] of a BindingResult-like message; code 0: a value.
function outcome(b, s, e) {
  let id = 0;
  let value = null;
  let code = 0;
  let message = '';
  let hasValue = false;
  fields(b, s, e, (f, wt, v, vs, ve) => {
    if (f === 1 && wt === 0) id = v;
    else if (f === 2 && wt === 2) { value = decodeValue(b, vs, ve); hasValue = true; }
    else if (f === 3 && wt === 2) {
      hasValue = false;
      fields(b, vs, ve, (ef, ew, ev, es, ee) => {
        if (ef === 1 && ew === 0) code = typeof ev === 'number' ? ev : 3;
        else if (ef === 2 && ew === 2) message = b.utf8Slice(es, ee);
      });
    }
  });
  return [id, value, hasValue ? 0 : code || 3, message];
}

// One SupervisorMsg: {kind: 'welcome', maxFrame} | {kind: 'call', id,
// method, args, deadlineUs} | {kind: 'bindingResult', id, value, code,
// message} | {kind: 'shutdown'} | {kind: 'unknown'}. deadlineUs:
// CLOCK_MONOTONIC in µs, after which the call is not started (0: none).
function supervisorMsg(b) {
  let m = null;
  fields(b, 0, b.length, (f, wt, v, s, e) => {
    if (m || wt !== 2) return;
    if (f === 1) {
      let maxFrame = 0;
      fields(b, s, e, (ff, w, x) => { if (ff === 2 && w === 0) maxFrame = x; });
      m = { kind: 'welcome', maxFrame };
    } else if (f === 2) {
      m = { kind: 'call', id: 0, method: '', args: null, deadlineUs: 0 };
      fields(b, s, e, (ff, w, x, xs, xe) => {
        if (ff === 1 && w === 0) m.id = x;
        else if (ff === 2 && w === 2) m.method = b.utf8Slice(xs, xe);
        else if (ff === 3 && w === 2) m.args = decodeValue(b, xs, xe);
        else if (ff === 5 && w === 0) m.deadlineUs = Number(x);
      });
    } else if (f === 3) {
      const [id, value, code, message] = outcome(b, s, e);
      m = { kind: 'bindingResult', id, value, code, message };
    } else if (f === 4) {
      m = { kind: 'shutdown' };
    }
  });
  return m || { kind: 'unknown' };
}

module.exports = {
  HEADER, MAX_FRAME, MAX_DEPTH, DecodeError, EncodeError, Double,
  encodeValue, decodeValue, fields, hello, callResult, bindingCall, log, supervisorMsg,
};
