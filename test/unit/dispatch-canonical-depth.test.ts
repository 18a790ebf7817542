import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, contentHash } from '../../shared/dispatch/canonical.js';

const DEPTH = 100_000;

/** The `canonicalize` package's RFC 8785 text: the reference the ledger's own serializer must match byte for byte. */
function reference(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('no JSON form');
  return text;
}

/** `levels` nested containers built without recursion. */
function nested(levels: number, leaf: unknown, wrap: (inner: unknown, level: number) => unknown): unknown {
  let value = leaf;
  for (let level = 0; level < levels; level += 1) value = wrap(value, level);
  return value;
}

describe('input that broke a writer: canonical JSON of values nested 100,000 levels deep', () => {
  it('serialises a 100,000-level array without overflowing the stack', () => {
    const value: unknown = JSON.parse(`${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`);
    expect(canonicalJson(value)).toBe(`${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`);
  });

  it('serialises a 100,000-level object with sorted keys without overflowing the stack', () => {
    const value = nested(DEPTH, 1, (inner) => ({ z: inner, a: [] }));
    expect(canonicalJson(value)).toBe(`${'{"a":[],"z":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`);
  });

  it('hashes a parsed message whose task is 100,000 levels of mixed arrays and objects', () => {
    const text = `{"task":${'[{"k":'.repeat(DEPTH)}null${'}]'.repeat(DEPTH)},"dispatchId":"d-1"}`;
    const value: unknown = JSON.parse(text);
    expect(canonicalJson(value)).toBe(`{"dispatchId":"d-1","task":${'[{"k":'.repeat(DEPTH)}null${'}]'.repeat(DEPTH)}}`);
    expect(contentHash(value)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('input that broke a writer: values JSON.parse yields but RFC 8785 has no form for', () => {
  it('writes a number that overflowed to ±Infinity as ±1e999, which parses back to it, instead of throwing', () => {
    const value: unknown = JSON.parse('{"n":[1e999,-1e999,1]}');
    expect(canonicalJson(value)).toBe('{"n":[1e999,-1e999,1]}');
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
    expect(contentHash(value)).not.toBe(contentHash({ n: [null, null, 1] }));
  });

  it('escapes a lone surrogate as JSON.stringify does instead of throwing', () => {
    const value: unknown = JSON.parse('{"s\\udc00":"x\\ud800y"}');
    expect(canonicalJson(value)).toBe('{"s\\udc00":"x\\ud800y"}');
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
  });

  it('parses back to the same value for random JSON with lone surrogates, where the package would throw', () => {
    const char16 = fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit));
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: char16, maxDepth: 4 }), (value) => {
        // The same value as JSON itself carries it: -0 has the JSON form 0 (RFC 8785 and JSON.stringify alike).
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
        expect(canonicalJson(JSON.parse(canonicalJson(value)))).toBe(canonicalJson(value));
      }),
      { numRuns: 300 },
    );
  });

  it('throws a TypeError when the value is NaN, circular, a bigint or has no JSON form', () => {
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = { back: circular };
    for (const value of [Number.NaN, circular, 1n, undefined, () => 1, Symbol('s')]) {
      expect(() => canonicalJson(value), String(typeof value)).toThrow(TypeError);
    }
  });

  it('serialises a value that appears twice, not in a cycle, both times', () => {
    const shared = { b: 1 };
    expect(canonicalJson({ x: shared, y: [shared, shared] })).toBe('{"x":{"b":1},"y":[{"b":1},{"b":1}]}');
  });
});

describe('canonicalJson matches the canonicalize package byte for byte', () => {
  it('is byte-equal on random JSON values', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }), { numRuns: 500 });
  });

  it('is byte-equal on random JSON values with any Unicode in strings and keys, and deeper nesting', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary', maxDepth: 8 }), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 300 },
    );
  });

  it('is byte-equal on random doubles, including the edges of the range', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ noNaN: true, noDefaultInfinity: true })), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 500 },
    );
  });

  it('is byte-equal where JSON.stringify drops or nulls values, and where toJSON applies', () => {
    const value = { a: undefined, b: [undefined, 1], c: new Date(0), d: { toJSON: () => ({ y: 2, x: 1 }) } };
    expect(canonicalJson(value)).toBe(reference(value));
    expect(canonicalJson(value)).toBe('{"b":[null,1],"c":"1970-01-01T00:00:00.000Z","d":{"x":1,"y":2}}');
  });

  it('keeps an own __proto__ key as data, as the canonicalize package does', () => {
    const value: unknown = JSON.parse('{"__proto__":{"b":1},"a":2}');
    expect(canonicalJson(value)).toBe('{"__proto__":{"b":1},"a":2}');
    expect(canonicalJson(value)).toBe(reference(value));
  });
});
