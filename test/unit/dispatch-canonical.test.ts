import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, contentHash } from '../../shared/dispatch/canonical.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A small deterministic PRNG (mulberry32), so a shrunk counterexample replays the same shuffle. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The same value with every object's keys in a shuffled insertion order; arrays keep their order. */
function shuffleKeys(value: Json, random: () => number): Json {
  if (Array.isArray(value)) return value.map((item) => shuffleKeys(item, random));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    const swap = entries[i];
    const other = entries[j];
    if (swap === undefined || other === undefined) continue;
    entries[i] = other;
    entries[j] = swap;
  }
  // fromEntries defines own properties, so a `__proto__` key stays data.
  return Object.fromEntries(entries.map(([key, item]) => [key, shuffleKeys(item, random)]));
}

const jsonObjectArb = fc.dictionary(fc.string(), fc.jsonValue()).map((value) => value as { [key: string]: Json });
const indentArb = fc.constantFrom<string | number>(0, 1, 2, 4, '\t', ' \n ');

describe('contentHash', () => {
  it('is a sha256 hex digest of the canonical JSON', () => {
    expect(contentHash({ b: 1, a: 2 })).toMatch(/^sha256:[0-9a-f]{64}$/);
    // sha256('{"a":2,"b":1}')
    expect(contentHash({ b: 1, a: 2 })).toBe('sha256:d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772');
  });

  it('is the same when the message is re-serialised with shuffled keys and other whitespace', () => {
    fc.assert(
      fc.property(jsonObjectArb, fc.integer(), indentArb, (value, seed, indent) => {
        const text = JSON.stringify(shuffleKeys(value, prng(seed)), null, indent);
        const reparsed: unknown = JSON.parse(text);
        expect(contentHash(reparsed)).toBe(contentHash(value));
        expect(contentHash(reparsed)).toBe(contentHash(JSON.parse(JSON.stringify(value))));
      }),
    );
  });

  it('differs when any one top-level value changes', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }),
        fc.nat(),
        fc.jsonValue(),
        (value, pick, replacement) => {
          const keys = Object.keys(value);
          const key = keys[pick % keys.length];
          if (key === undefined) return;
          fc.pre(canonicalJson(value[key]) !== canonicalJson(replacement));
          const changed = { ...value, [key]: replacement };
          expect(contentHash(changed)).not.toBe(contentHash(value));
        },
      ),
    );
  });

  it('differs when a nested value, a type, an array order or a key changes', () => {
    const base = { task: { goal: 'x', steps: [1, 2] }, flag: true, n: 1 };
    const hash = contentHash(base);
    expect(contentHash({ task: { goal: 'y', steps: [1, 2] }, flag: true, n: 1 })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [2, 1] }, flag: true, n: 1 })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: 'true', n: 1 })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: true, n: '1' })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: true, n: 1.5 })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: true, N: 1 })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: true })).not.toBe(hash);
    expect(contentHash({ task: { goal: 'x', steps: [1, 2] }, flag: true, n: 1, extra: null })).not.toBe(hash);
  });

  it('is the same when numbers are written differently but are the same value', () => {
    expect(contentHash(JSON.parse('{"n":1.0,"m":1e2,"k":-0}'))).toBe(contentHash(JSON.parse('{"n":1,"m":100,"k":0}')));
  });
});

describe('canonicalJson', () => {
  it('serialises numbers as RFC 8785 (ECMAScript Number.toString) when given the RFC examples', () => {
    const cases: Array<[number, string]> = [
      [1e21, '1e+21'],
      [1e30, '1e+30'],
      [1e-7, '1e-7'],
      [0.000001, '0.000001'],
      [-0, '0'],
      [0, '0'],
      [4.5, '4.5'],
      [2e-3, '0.002'],
      [333333333.33333329, '333333333.3333333'],
      [5e-324, '5e-324'],
      [-5e-324, '-5e-324'],
      [9007199254740992, '9007199254740992'],
      [295147905179352830000, '295147905179352830000'],
      [1.7976931348623157e308, '1.7976931348623157e+308'],
      [-1.7976931348623157e308, '-1.7976931348623157e+308'],
      [Number.parseFloat('0.1') + Number.parseFloat('0.2'), '0.30000000000000004'],
    ];
    for (const [value, text] of cases) expect(canonicalJson(value), text).toBe(text);
  });

  it('reads the same canonical number when the source text has another form', () => {
    expect(canonicalJson(JSON.parse('[4.50, 1E30, 2e-3, 1e+21, 0.0000010]'))).toBe('[4.5,1e+30,0.002,1e+21,0.000001]');
  });

  it('sorts keys by UTF-16 code units when given the RFC 8785 §3.2.3 example', () => {
    const value = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    expect(canonicalJson(value)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('orders a surrogate-pair key before a high BMP key when code units say so, unlike code points', () => {
    // U+1F600 is D83D DE00 in UTF-16: it sorts before U+FB33 by code unit, after it by code point.
    expect(canonicalJson({ '\ufb33': 1, '\ud83d\ude00': 2 })).toBe('{"\ud83d\ude00":2,"\ufb33":1}');
  });

  it('sorts nested object keys and keeps array order', () => {
    expect(canonicalJson({ b: [3, { z: 1, a: 2 }, 1], a: { d: null, c: true } })).toBe('{"a":{"c":true,"d":null},"b":[3,{"a":2,"z":1},1]}');
  });

  it('escapes strings as RFC 8785 §3.2.2.2 when given the RFC string example', () => {
    const value = ['\u20ac$\u000F\u000aA\'\u0042\u0022\u005c\\"/'];
    expect(canonicalJson(value)).toBe('["€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"]');
  });

  it('writes literals and an empty structure without whitespace', () => {
    expect(canonicalJson({ a: [], b: {}, c: null, d: false, e: true, f: '' })).toBe('{"a":[],"b":{},"c":null,"d":false,"e":true,"f":""}');
  });

  it('throws when the value has no JSON form', () => {
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
  });
});
