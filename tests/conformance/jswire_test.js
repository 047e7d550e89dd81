'use strict';
// The JavaScript SDK's hand encoding (sdk/js/wire.js) against the bytes
// pywire_test.py pins (worked out from gadget.proto by hand), and back:
// every kind, the int64 ends (sint64: zigzag; a bigint beyond 2^53),
// numbers as ints or doubles, depth as gadgetd counts it, what is no
// gadget value, and a map key "__proto__" kept as a key. The conformance
// suite checks the same code against gadgetd itself; this pins the bytes.
const path = require('path');
const wire = require(path.join(__dirname, '..', '..', 'sdk', 'js', 'wire.js'));

const b = (s) => Buffer.from(s, 'latin1');
const KNOWN = [
  [null, b('\x08\x01')],
  [true, b('\x10\x01')],
  [false, b('\x10\x00')],
  [0, b('\x18\x00')],
  [-1, b('\x18\x01')],
  [1, b('\x18\x02')],
  [2 ** 53 - 1, b('\x18\xfe\xff\xff\xff\xff\xff\xff\x1f')],
  [-(2 ** 53 - 1), b('\x18\xfd\xff\xff\xff\xff\xff\xff\x1f')],
  [2n ** 63n - 1n, b('\x18\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01')],
  [-(2n ** 63n), b('\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01')],
  [1.5, b('\x21\x00\x00\x00\x00\x00\x00\xf8\x3f')],
  [2 ** 53, b('\x21\x00\x00\x00\x00\x00\x00\x40\x43')],  // whole, but not exact as an int: a double
  ['a', b('\x2a\x01a')],
  ['é', b('\x2a\x02\xc3\xa9')],
  [Buffer.from([0, 255]), b('\x32\x02\x00\xff')],
  [[], b('\x3a\x00')],
  [[1], b('\x3a\x04\x0a\x02\x18\x02')],
  [{}, b('\x42\x00')],
  [{ k: null }, b('\x42\x09\x0a\x07\x0a\x01k\x12\x02\x08\x01')],
];

function same(x, y) {
  if (typeof x !== typeof y) return false;
  if (x === null || typeof x !== 'object') return Object.is(x, y);
  if (Buffer.isBuffer(x)) return Buffer.isBuffer(y) && x.equals(y);
  if (Array.isArray(x) !== Array.isArray(y)) return false;
  const kx = Object.keys(x);
  const ky = Object.keys(y);
  return kx.length === ky.length && kx.every((k, i) => k === ky[i] && same(x[k], y[k]));
}

const failed = [];
const show = (v) => (typeof v === 'bigint' ? `${v}n` : JSON.stringify(v));
for (const [v, want] of KNOWN) {
  const got = wire.encodeValue(v);
  if (!got.equals(want)) failed.push(`encode ${show(v)}: ${got.toString('hex')}, want ${want.toString('hex')}`);
  const back = wire.decodeValue(want, 0, want.length);
  if (!same(back, v)) failed.push(`decode ${want.toString('hex')}: ${show(back)}`);
}
const whole = wire.encodeValue(new wire.Double(2));
if (!whole.equals(b('\x21\x00\x00\x00\x00\x00\x00\x00\x40'))) failed.push(`Double(2): ${whole.toString('hex')}`);
const negz = wire.encodeValue(-0);
if (!Object.is(wire.decodeValue(negz, 0, negz.length), -0)) failed.push('-0 is not kept');
const nan = wire.encodeValue(NaN);
if (!Number.isNaN(wire.decodeValue(nan, 0, nan.length))) failed.push('NaN');
const skipped = wire.encodeValue({ a: 1, b: undefined });
if (!same(wire.decodeValue(skipped, 0, skipped.length), { a: 1 })) failed.push('an undefined field is not left out');
const protoKey = b('\x42\x11\x0a\x0f\x0a\x09__proto__\x12\x02\x18\x02');
const o = wire.decodeValue(protoKey, 0, protoKey.length);
if (Object.getPrototypeOf(o) !== Object.prototype || !Object.prototype.hasOwnProperty.call(o, '__proto__') ||
    o.__proto__ !== 1) failed.push('a "__proto__" key set the prototype');   // eslint-disable-line no-proto
// A hello with an untyped method first: its empty signature keeps its
// place among the repeated signatures (the bytes the Python SDK sends).
const hello = wire.hello('n', 2, ['a', 'b'], [null, 'b() -> int']);
if (!hello.equals(Buffer.from('1b0000000a190a016e10021a01611a01622200220a622829202d3e20696e74', 'hex'))) {
  failed.push(`hello: ${hello.toString('hex')}`);
}
let deep = 'x';
for (let i = 0; i < wire.MAX_DEPTH; i++) deep = [deep];
const packed = wire.encodeValue(deep);
if (!same(wire.decodeValue(packed, 0, packed.length), deep)) failed.push('32 deep');
for (const bad of [[deep], 2n ** 63n, -(2n ** 63n) - 1n, new Set([1]), () => 1, Symbol('s'), '\ud800',
  new Map([[1, 2]]), new Date(0)]) {
  try {
    wire.encodeValue(bad);
    failed.push(`encoded ${String(bad)}`);
  } catch (e) {
    if (!(e instanceof wire.EncodeError)) failed.push(`${String(bad)}: ${e}`);
  }
}
for (const junk of ['\x2a\x05ab', '\x07', '\x3a\x02\x0a\x05']) {
  try {
    wire.decodeValue(b(junk), 0, junk.length);
    failed.push(`decoded ${Buffer.from(junk, 'latin1').toString('hex')}`);
  } catch (e) {
    if (!(e instanceof wire.DecodeError)) failed.push(`${junk}: ${e}`);
  }
}
for (const f of failed) console.log('FAIL', f);
console.log(failed.length ? `${failed.length} failed` : 'ok');
process.exit(failed.length ? 1 : 0);
