#!/usr/bin/node
'use strict';
// notes, in JavaScript: titled notes in a kv binding (examples/notes in C).
// add({title, text}), get({title}) -> text, list({prefix}) -> [titles],
// delete({title}) -> existed.
const { Gadget } = require('@gadgetd/gadget');

class Notes extends Gadget {
  // The signatures are the argument checks: a method runs only with what
  // its signature allows.
  static signatures = {
    add: 'add(title: string(1..200), text: string) -> null',
    get: 'get(title: string(1..200)) -> string',
    list: 'list(prefix?: string) -> list<string>',
    remove: 'delete(title: string(1..200)) -> bool',
  };

  async add({ title, text }) {
    await this.kv('NOTES').put(title, text);
    return null;
  }

  get({ title }) {
    return this.kv('NOTES').get(title);   // NOT_FOUND when there is no such note
  }

  async list({ prefix }) {
    // Page through every key with the cursor.
    const titles = [];
    let cursor = null;
    do {
      const page = await this.kv('NOTES').list({ prefix, limit: 100, cursor });
      titles.push(...page.keys);
      cursor = page.cursor;
    } while (cursor);
    return titles;
  }

  remove({ title }) {
    return this.kv('NOTES').delete(title);
  }
}

new Notes().run();
