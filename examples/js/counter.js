#!/usr/bin/node
'use strict';
// counter, in JavaScript: a durable count in a kv binding (examples/counter
// in C). increment() -> the new count; get() -> the count.
const { Gadget } = require('@gadgetd/gadget');

class Counter extends Gadget {
  static signatures = {
    increment: 'increment() -> int',
    get: 'get() -> int',
  };

  async increment() {
    const n = (await this.kv('COUNT').get('count', 0)) + 1;
    await this.kv('COUNT').put('count', n);
    return n;
  }

  get() {
    return this.kv('COUNT').get('count', 0);
  }
}

new Counter().run();
