import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contentHash } from '../../shared/dispatch/canonical.js';
import { readDispatchMessage, type FieldError, type ReadMessage } from '../../shared/dispatch/message.js';

/** A minimal valid message (CONTRACT §1); override or add fields per test. */
function messageFactory(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    dispatchId: 'd-2026-0001',
    origin: 'planner',
    target: 'demo-agent',
    task: { goal: 'summarise the incident' },
    ...overrides,
  };
}

const read = (body: unknown): ReadMessage => readDispatchMessage(JSON.stringify(body));

function expectValid(result: ReadMessage) {
  if (result.kind !== 'valid') throw new Error(`expected a valid message, got ${JSON.stringify(result).slice(0, 2000)}`);
  return result;
}

function expectInvalid(result: ReadMessage) {
  if (result.kind !== 'invalid') throw new Error(`expected an invalid message, got ${JSON.stringify(result).slice(0, 2000)}`);
  return result;
}

/** `levels` nested containers around `leaf`, built without recursion: `{a:{a:…leaf}}` or `[[…leaf]]`. */
function nested(levels: number, leaf: unknown = 1, kind: 'object' | 'array' = 'object'): unknown {
  let value = leaf;
  for (let level = 0; level < levels; level += 1) value = kind === 'object' ? { a: value } : [value];
  return value;
}

/** JSON text of `levels` nested objects (JSON.stringify itself overflows long before 100,000). */
const deepObjectJson = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const deepArrayJson = (levels: number): string => `${'['.repeat(levels)}${']'.repeat(levels)}`;

/** A message body whose `task` is the given JSON text. */
const bodyWithTask = (taskJson: string, head = '"dispatchId":"d-1","origin":"planner","target":"demo-agent"'): string =>
  `{${head}${head ? ',' : ''}"task":${taskJson}}`;

const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');
/** The error texts as the intake joins them into a blocked reason. */
const joined = (errors: readonly FieldError[]): string => errors.map((error) => `${error.field}: ${error.message}`).join('; ');
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Every bound of CONTRACT §1 on the error list: ≤ 20 entries, ≤ 200 chars a text, ≤ 1 KB joined, well-formed. */
function expectBoundedErrors(errors: readonly FieldError[]): void {
  expect(errors.length).toBeGreaterThan(0);
  expect(errors.length).toBeLessThanOrEqual(20);
  for (const error of errors) {
    expect(error.field.length).toBeLessThanOrEqual(200);
    expect(error.message.length).toBeLessThanOrEqual(200);
    expect(LONE_SURROGATE.test(error.field) || LONE_SURROGATE.test(error.message)).toBe(false);
  }
  expect(utf8(joined(errors))).toBeLessThanOrEqual(1024);
}

describe('input that broke a writer: a task nested deeper than 64 levels', () => {
  it('accepts a task nested exactly 64 levels deep, objects or arrays, when the task object is level 1', () => {
    expectValid(read(messageFactory({ task: nested(64) })));
    expectValid(read(messageFactory({ task: nested(63, {}) })));
    expectValid(read(messageFactory({ task: { list: nested(63, 'leaf', 'array') } })));
    expectValid(read(messageFactory({ task: { list: nested(62, [], 'array') } })));
  });

  it('is invalid with a too_deep error on task when the task is 65 levels deep', () => {
    for (const task of [nested(65), nested(64, {}), { list: nested(64, 'leaf', 'array') }, { list: nested(63, [], 'array') }]) {
      const result = expectInvalid(read(messageFactory({ task })));
      expect(result.errors).toEqual([{ field: 'task', message: expect.stringContaining('nested deeper than 64 levels') }]);
      expect(result.errors[0]?.message).toContain('too_deep');
      expect(result.target).toBe('demo-agent');
    }
  });

  it('returns invalid rather than overflowing the stack when the task is 100,000 levels deep', () => {
    for (const taskJson of [deepObjectJson(100_000), `{"x":${deepArrayJson(100_000)}}`]) {
      const result = expectInvalid(readDispatchMessage(bodyWithTask(taskJson)));
      expect(result.dispatchId).toBe('d-1');
      expect(result.errors).toEqual([{ field: 'task', message: expect.stringContaining('too_deep') }]);
      // The intake hashes every attributable message, too deep or not.
      expect(contentHash(result.parsed)).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
  });

  it('returns invalid when a 1 MiB body is nested as deep as it can be (V8 JSON.parse is iterative; the check too)', () => {
    const frame = bodyWithTask('{"a":}');
    const levels = Math.floor((1024 * 1024 - frame.length) / 2);
    const body = bodyWithTask(`{"a":${deepArrayJson(levels)}}`);
    expect(utf8(body)).toBeLessThanOrEqual(1024 * 1024);
    expect(levels).toBeGreaterThan(500_000);
    const result = expectInvalid(readDispatchMessage(body));
    expect(result.errors).toEqual([{ field: 'task', message: expect.stringContaining('too_deep') }]);
    expect(contentHash(result.parsed)).toMatch(/^sha256:/);
  });

  it('still finds a __proto__ key when it sits 100,000 levels down (the check is iterative)', () => {
    const result = expectInvalid(readDispatchMessage(bodyWithTask(`${'{"a":'.repeat(100_000)}{"__proto__":1}${'}'.repeat(100_000)}`)));
    expect(result.errors.map((error) => error.field)).toContain('task');
    expectBoundedErrors(result.errors);
  });

  it('is unreadable too_deep, keeping the readable origin, when the body is too deep and has no readable dispatchId', () => {
    expect(readDispatchMessage(bodyWithTask(deepObjectJson(100_000), '"origin":"planner"'))).toEqual({
      kind: 'unreadable',
      reason: 'too_deep',
      origin: 'planner',
    });
    expect(readDispatchMessage(bodyWithTask(deepObjectJson(65), '"dispatchId":"d-1"'))).toEqual({
      kind: 'unreadable',
      reason: 'too_deep',
      dispatchId: 'd-1',
    });
    expect(readDispatchMessage(`{"x":${deepArrayJson(100_000)}}`)).toEqual({ kind: 'unreadable', reason: 'too_deep' });
  });

  it('keeps the plain unreadable reasons when the body is too deep but not an object, or not JSON', () => {
    expect(readDispatchMessage(deepArrayJson(100_000))).toEqual({ kind: 'unreadable', reason: 'not_an_object' });
    expect(readDispatchMessage(deepArrayJson(100_000).slice(1))).toEqual({ kind: 'unreadable', reason: 'not_json' });
  });

  it('is invalid with a too_deep error on the field when another field is nested deeper than 64 levels', () => {
    const deepTimeouts = expectInvalid(readDispatchMessage(`{"dispatchId":"d-1","origin":"planner","target":"demo-agent","task":{},"timeouts":{"stallAfterSeconds":${deepArrayJson(100_000)}}}`));
    expect(deepTimeouts.errors).toContainEqual({ field: 'timeouts', message: expect.stringContaining('too_deep') });
    expectBoundedErrors(deepTimeouts.errors);
    const deepUnknown = expectInvalid(read(messageFactory({ extra: nested(65) })));
    expect(deepUnknown.errors).toContainEqual({ field: 'extra', message: expect.stringContaining('too_deep') });
    expect(deepUnknown.errors).toContainEqual({ field: '(message)', message: expect.stringContaining('extra') });
  });
});

describe('input that broke a writer: numbers and strings JSON.parse reads but nothing can store', () => {
  it('is invalid with a non_finite error when a task number overflows to Infinity', () => {
    const result = expectInvalid(readDispatchMessage(bodyWithTask('{"goal":"x","n":[1,-1e999]}')));
    expect(result.errors).toEqual([{ field: 'task.n.1', message: expect.stringContaining('non_finite_number') }]);
    expect(contentHash(result.parsed)).toMatch(/^sha256:/);
  });

  it('is invalid with a lone_surrogate error when a task string or key has an unpaired surrogate', () => {
    const value = expectInvalid(readDispatchMessage(bodyWithTask('{"goal":"x\\ud800"}')));
    expect(value.errors).toEqual([{ field: 'task.goal', message: expect.stringContaining('lone_surrogate') }]);
    const key = expectInvalid(readDispatchMessage(bodyWithTask('{"go\\udc00al":"x"}')));
    expect(key.errors).toEqual([{ field: 'task.go\ufffdal', message: expect.stringContaining('lone_surrogate') }]);
    expectBoundedErrors(key.errors);
    expect(contentHash(key.parsed)).toMatch(/^sha256:/);
  });

  it('accepts well-formed surrogate pairs and large finite numbers in a task', () => {
    expectValid(readDispatchMessage(bodyWithTask('{"goal":"\\ud83d\\ude00","n":1.7976931348623157e308}')));
  });
});

describe('input that broke a writer: error texts bounded whatever the input', () => {
  it('names a few unknown keys and counts the rest when there are thousands of them', () => {
    const extra = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`unknownField${i}`, i]));
    const result = expectInvalid(read(messageFactory(extra)));
    expectBoundedErrors(result.errors);
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]?.message).toContain('unknownField0');
    expect(result.errors[0]?.message).toMatch(/more/);
  });

  it('clips a field path when a key is 100 KB long', () => {
    const key = 'k'.repeat(100_000);
    const result = expectInvalid(readDispatchMessage(bodyWithTask(`{"${key}":{"__proto__":1}}`)));
    expectBoundedErrors(result.errors);
    expect(result.errors[0]?.field.startsWith('task.kkk')).toBe(true);
    const unknown = expectInvalid(read(messageFactory({ [key]: 1 })));
    expectBoundedErrors(unknown.errors);
  });

  it('keeps at most 20 entries, the last saying how many more, when there are dozens of errors', () => {
    const refs = Array.from({ length: 32 }, (_, i) => `../f${i}`);
    const result = expectInvalid(read(messageFactory({ expectedEvidence: refs, maxHops: -1, priority: 99 })));
    expectBoundedErrors(result.errors);
    // 32 unsafe refs, maxHops and priority: 34 errors, of which the shown ones are counted out.
    const shown = result.errors.length - 1;
    expect(shown).toBeGreaterThanOrEqual(10);
    expect(result.errors.at(-1)).toEqual({ field: '(message)', message: `…and ${34 - shown} more errors` });
    expect(result.errors[0]).toEqual({ field: 'expectedEvidence.0', message: expect.stringContaining('dot_segment') });
  });

  it('stays within 1 KB joined, cutting with a count, when several errors are each long', () => {
    const long = (prefix: string): string => `${prefix}${'x'.repeat(5000)}`;
    const deepLongKeys = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [long(`deep${i}`), nested(65)]));
    const body = JSON.stringify(
      messageFactory({
        ...deepLongKeys,
        [long('top')]: 1,
        timeouts: { [long('timeout')]: 1 },
        delivery: { mode: 'callback', [long('delivery')]: 1 },
        task: { [long('proto')]: JSON.parse('{"__proto__":1}') as unknown, [long('inf')]: 0 },
      }),
    ).replace(/"inf(x+)":0/, '"inf$1":1e999');
    const result = expectInvalid(readDispatchMessage(body));
    expectBoundedErrors(result.errors);
    expect(result.errors[0]).toEqual({ field: expect.stringMatching(/^deep0xxx/), message: expect.stringContaining('too_deep') });
    expect(result.errors.at(-1)?.message).toMatch(/^…and \d+ more errors?$/);
  });

  it('replaces control characters and lone surrogates in the texts when keys hold them', () => {
    const result = expectInvalid(readDispatchMessage(JSON.stringify(messageFactory({ 'bad\u0000\nkey': 1 })).replace('bad', 'bad\\ud800')));
    expectBoundedErrors(result.errors);
    expect(result.errors[0]?.message).not.toMatch(/[\u0000-\u001f]/);
  });

  it('keeps every error list bounded when random junk keys and values are added', () => {
    const junk = fc.dictionary(fc.string({ unit: 'binary', maxLength: 300 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 40 });
    fc.assert(
      fc.property(junk, junk, junk, (top, timeouts, task) => {
        const result = readDispatchMessage(JSON.stringify(messageFactory({ ...top, timeouts, task, expectedEvidence: Object.keys(task) })));
        if (result.kind === 'invalid') expectBoundedErrors(result.errors);
        expect(JSON.stringify(result.kind === 'invalid' ? { ...result, parsed: null } : result.kind === 'valid' ? null : result).length).toBeLessThan(4096);
      }),
      { numRuns: 200 },
    );
  });
});

describe('input that broke a writer: large messages read in linear time', () => {
  it('returns a bounded error list when timeouts has 100,000 unknown keys', () => {
    const timeouts = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`t${i}`, i]));
    const result = expectInvalid(read(messageFactory({ timeouts })));
    expect(result.errors).toHaveLength(1);
    expectBoundedErrors(result.errors);
  });

  it('accepts a 1 MiB task of 100,000 keys and hashes it', () => {
    const task: Record<string, unknown> = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [i.toString(36), i % 10]));
    task._pad = 'p'.repeat(1_040_000 - utf8(JSON.stringify(messageFactory({ task }))) - 10);
    const body = JSON.stringify(messageFactory({ task }));
    expect(utf8(body)).toBeGreaterThan(1_000_000);
    expect(utf8(body)).toBeLessThanOrEqual(1024 * 1024);
    const result = expectValid(readDispatchMessage(body));
    expect(Object.keys(result.message.task)).toHaveLength(100_001);
    expect(contentHash(result.parsed)).toMatch(/^sha256:/);
  });

  it('returns a bounded error list when expectedEvidence holds 100,000 unsafe refs', () => {
    const result = expectInvalid(read(messageFactory({ expectedEvidence: Array.from({ length: 100_000 }, () => '/abs') })));
    expectBoundedErrors(result.errors);
    expect(result.errors).toEqual([{ field: 'expectedEvidence', message: expect.stringContaining('32') }]);
  });
});
