import { createHash } from 'node:crypto';

/**
 * One container being written: its items, or its keys in RFC 8785 order, and how far along it is.
 * An explicit stack of these replaces recursion, so no nesting depth can exhaust the call stack
 * (`JSON.parse` reads a 1 MiB body of 500,000 nested arrays; the `canonicalize` package — and
 * `JSON.stringify` — overflow at ~10,000).
 */
interface Frame {
  readonly container: object;
  readonly items: readonly unknown[] | undefined;
  readonly keys: readonly string[] | undefined;
  index: number;
  wrote: boolean;
}

interface WithToJson {
  toJSON(key: string): unknown;
}

const hasToJson = (value: object): value is WithToJson => typeof (value as Partial<WithToJson>).toJSON === 'function';

/** What JSON.stringify would write for `value` in place of a property or item: the `toJSON` result, if any. */
function jsonValueOf(value: unknown, key: string): unknown {
  if (typeof value === 'object' && value !== null && hasToJson(value)) return value.toJSON(key);
  return value;
}

/** A value JSON.stringify leaves out of an object (and writes as `null` in an array). */
const omitted = (value: unknown): boolean => value === undefined || typeof value === 'function' || typeof value === 'symbol';

/**
 * A scalar's canonical text, or undefined for a container. Numbers and strings are serialised as
 * ECMAScript's JSON.stringify does, which is what RFC 8785 §3.2.2 specifies. Two inputs that
 * JSON.parse produces but RFC 8785 has no form for (it requires I-JSON) get a deterministic,
 * re-parseable form rather than an exception, so that any parsed message can be hashed:
 * a number literal that overflowed to ±Infinity is written `1e999` / `-1e999`, and a lone surrogate
 * keeps JSON.stringify's `\udXXX` escape (the `canonicalize` package throws on both).
 */
function scalarText(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (Number.isNaN(value)) throw new TypeError('NaN has no JSON form');
      if (value === Number.POSITIVE_INFINITY) return '1e999';
      if (value === Number.NEGATIVE_INFINITY) return '-1e999';
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new TypeError('a bigint has no JSON form');
    case 'object':
      if (value === null) return 'null';
      // Boxed primitives are written as their value, as JSON.stringify does.
      if (value instanceof Number || value instanceof String || value instanceof Boolean) return scalarText(value.valueOf());
      return undefined;
    default:
      throw new TypeError('value has no JSON form');
  }
}

/**
 * RFC 8785 (JCS) canonical JSON of a parsed value: no whitespace, object keys sorted by UTF-16 code
 * units, numbers and strings as JSON.stringify writes them. Iterative (an explicit stack), so it works
 * at any depth; byte-equal with the `canonicalize` package on every JSON value (a property test checks).
 * Throws a TypeError for what has no JSON form: undefined, a function, a symbol, NaN, a bigint, a cycle.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  const stack: Frame[] = [];
  /** The containers on the stack, for cycle detection (a value seen twice, not in a cycle, is fine). */
  const open = new Set<object>();

  /** Writes a scalar, or opens a container and pushes its frame. */
  const begin = (input: unknown): void => {
    const text = scalarText(input);
    if (text !== undefined) {
      out.push(text);
      return;
    }
    const container = input as object;
    if (open.has(container)) throw new TypeError('a circular structure has no JSON form');
    open.add(container);
    if (Array.isArray(container)) {
      out.push('[');
      stack.push({ container, items: container as readonly unknown[], keys: undefined, index: 0, wrote: false });
    } else {
      out.push('{');
      // Array.prototype.sort compares strings by UTF-16 code units: the order RFC 8785 §3.2.3 asks for.
      stack.push({ container, items: undefined, keys: Object.keys(container).sort(), index: 0, wrote: false });
    }
  };

  const top = jsonValueOf(value, '');
  if (omitted(top)) throw new TypeError('value has no JSON form');
  begin(top);

  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.items) {
      if (frame.index >= frame.items.length) {
        out.push(']');
        stack.pop();
        open.delete(frame.container);
        continue;
      }
      const index = frame.index;
      frame.index += 1;
      if (index > 0) out.push(',');
      const item = jsonValueOf(frame.items[index], String(index));
      if (omitted(item)) out.push('null');
      else begin(item);
      continue;
    }
    const keys = frame.keys as readonly string[];
    let next: { key: string; item: unknown } | undefined;
    while (frame.index < keys.length && next === undefined) {
      const key = keys[frame.index] as string;
      frame.index += 1;
      const item = jsonValueOf((frame.container as Record<string, unknown>)[key], key);
      if (!omitted(item)) next = { key, item };
    }
    if (next === undefined) {
      out.push('}');
      stack.pop();
      open.delete(frame.container);
      continue;
    }
    if (frame.wrote) out.push(',');
    frame.wrote = true;
    out.push(JSON.stringify(next.key), ':');
    begin(next.item);
  }
  return out.join('');
}

/** "Same content" (CONTRACT §1): the SHA-256 of the canonical JSON, as `sha256:<hex>`. Any depth, any parsed JSON. */
export function contentHash(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(value)).digest('hex')}`;
}
