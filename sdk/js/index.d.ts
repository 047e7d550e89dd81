// Types of @gadgetd/gadget (index.js), for editors and TypeScript gadgets.

/** Bytes received: a Node.js Buffer (typed without @types/node). */
export interface Bytes extends Uint8Array {
  toString(encoding?: string, start?: number, end?: number): string;
}

/** A gadget value: what a method gets and answers, and a binding call's arguments and result. */
export type Value = null | boolean | number | bigint | string | Uint8Array | Double | Value[] |
  { [key: string]: Value | undefined } | Map<string, Value>;

/** gadget.proto's ErrorCode: the numbers of proto/contract.c. */
export declare const ErrorCode: Readonly<{
  INVALID: 1; NO_METHOD: 2; FAILED: 3; DENIED: 4; UNAVAILABLE: 5; TIMEOUT: 6;
  BUSY: 7; PROTOCOL: 8; LIMIT: 9; NOT_FOUND: 10; GONE: 11; INTERNAL: 12;
}>;

/** An error answer: thrown by a method, or a binding call's rejection. */
export declare class GadgetError extends Error {
  constructor(code: number, message?: string);
  /** The code (a number of ErrorCode; any other reads as FAILED). */
  readonly code: number;
  /** Its name in ErrorCode ("NOT_FOUND"). */
  readonly codeName: string;
  /** The message as given (Error's message is "not_found: ..."). */
  readonly detail: string;
}

/** A number sent as a double even when it is whole. */
export declare class Double {
  constructor(v: number);
  readonly value: number;
}

export declare class KV {
  get(key: string): Promise<Value>;
  get<T>(key: string, fallback: T): Promise<Value | T>;
  put(key: string, value: Value): Promise<null>;
  delete(key: string): Promise<boolean>;
  list(options?: { prefix?: string; limit?: number; cursor?: string | null }):
    Promise<{ keys: string[]; cursor: string | null }>;
  cas(key: string, expect?: Value, value?: Value): Promise<{ written: boolean; current?: Value }>;
  batch(ops: Array<{ op: 'put' | 'delete' | 'cas'; key: string; value?: Value; expect?: Value }>):
    Promise<{ applied: boolean; results?: Value[]; failed?: number; current?: Value }>;
}

export declare class HTTP {
  request(url: string, options?: { method?: string; headers?: { [name: string]: string };
    body?: string | Uint8Array }): Promise<{ status: number; headers: { [name: string]: string }; body: Bytes }>;
  get(url: string, options?: { headers?: { [name: string]: string } }):
    Promise<{ status: number; headers: { [name: string]: string }; body: Bytes }>;
}

export declare class Peer {
  call(method: string, args?: Value): Promise<Value>;
}

export declare class Alarms {
  set(options: { at?: number; delay?: number; payload?: Value; id?: string }): Promise<string>;
  list(options?: { limit?: number; cursor?: string | null }): Promise<Value>;
  cancel(id: string): Promise<boolean>;
}

/** The base class of a gadget: its subclass's static signatures name its methods. */
export declare class Gadget {
  /** JavaScript method name -> its signature in gadgetd's type language (null: untyped). */
  static signatures?: { [method: string]: string | null };
  /** name: the gadget's name; by default the one gadgetd gives (GADGET_NAME). */
  constructor(name?: string);
  readonly name: string;
  kv(binding: string): KV;
  http(binding: string): HTTP;
  gadget(binding: string): Peer;
  alarms(binding: string): Alarms;
  text(binding: string): Promise<string>;
  secret(binding: string): Promise<string>;
  bindingCall(binding: string, op: string, args?: Value): Promise<Value>;
  log(text: string, level?: number): void;
  /** Serves until gadgetd asks the gadget to stop (calls started are answered): 0, or 1 if the connection failed. */
  serve(): Promise<number>;
  /** serve(), then exit with its status. */
  run(): void;
}

export declare const PROTOCOL_VERSION: 2;
