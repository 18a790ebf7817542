import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_HOPS,
  DEFAULT_TIMEOUTS,
  DispatchMessageSchema,
  readDispatchMessage,
  type FieldError,
  type ReadMessage,
} from '../../shared/dispatch/message.js';

/** A minimal valid message body (CONTRACT §1); override or drop fields per test. */
function messageFactory(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    dispatchId: 'd-2026-0001',
    origin: 'planner',
    target: 'demo-agent',
    task: { goal: 'summarise the incident', behavior: 'complete' },
    ...overrides,
  };
}

function without(body: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([key]) => !keys.includes(key)));
}

const read = (body: unknown): ReadMessage => readDispatchMessage(JSON.stringify(body));

function expectValid(result: ReadMessage) {
  if (result.kind !== 'valid') throw new Error(`expected a valid message, got ${JSON.stringify(result)}`);
  return result;
}

function expectInvalid(result: ReadMessage) {
  if (result.kind !== 'invalid') throw new Error(`expected an invalid message, got ${JSON.stringify(result)}`);
  return result;
}

const fields = (errors: readonly FieldError[]): string[] => errors.map((error) => error.field);

describe('readDispatchMessage', () => {
  it('applies every default when only the required fields are given', () => {
    const result = expectValid(read(messageFactory()));
    expect(result.message).toEqual({
      dispatchId: 'd-2026-0001',
      origin: 'planner',
      target: 'demo-agent',
      task: { goal: 'summarise the incident', behavior: 'complete' },
      expectedEvidence: [],
      delivery: { mode: 'callback' },
      timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 },
      maxHops: 4,
      resultDelivery: 'after_turn',
      priority: 5,
    });
    expect(result.message.parentDispatchId).toBeUndefined();
    expect(result.message.notBefore).toBeUndefined();
    expect(result.message.traceparent).toBeUndefined();
    expect(DEFAULT_TIMEOUTS).toEqual({ stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 });
    expect(DEFAULT_MAX_HOPS).toBe(4);
  });

  it('returns the parsed body unchanged when the message is valid', () => {
    const body = messageFactory();
    expect(expectValid(read(body)).parsed).toEqual(body);
  });

  it('keeps every optional field when all are given', () => {
    const body = messageFactory({
      expectedEvidence: ['out/report.md', 'out/data.csv'],
      delivery: { mode: 'detached' },
      timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 120, deliveryGraceSeconds: 30 },
      parentDispatchId: 'd-2026-0000',
      maxHops: 2,
      resultDelivery: 'inject',
      notBefore: '2026-12-02T09:00:00.000Z',
      priority: 0,
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    });
    expect(expectValid(read(body)).message).toEqual(body);
  });

  it('fills the missing timeouts when only some are given', () => {
    const { message } = expectValid(read(messageFactory({ timeouts: { stallAfterSeconds: 30 } })));
    expect(message.timeouts).toEqual({ stallAfterSeconds: 30, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 });
  });

  it('accepts the boundary identifiers when they use every allowed character', () => {
    const dispatchId = `${'A'.repeat(120)}az09._:-`;
    const origin = 'a'.repeat(62) + '-9';
    const { message } = expectValid(read(messageFactory({ dispatchId, origin, maxHops: 0 })));
    expect(message.dispatchId).toHaveLength(128);
    expect(message.origin).toHaveLength(64);
    expect(message.maxHops).toBe(0);
  });

  it('accepts 32 expected refs when that is the limit', () => {
    const refs = Array.from({ length: 32 }, (_, i) => `out/f${i}.md`);
    expect(expectValid(read(messageFactory({ expectedEvidence: refs }))).message.expectedEvidence).toEqual(refs);
  });

  it('does not share default objects when two messages are read', () => {
    const first = expectValid(read(messageFactory())).message;
    const second = expectValid(read(messageFactory())).message;
    expect(first.timeouts).not.toBe(second.timeouts);
    expect(first.delivery).not.toBe(second.delivery);
    expect(first.expectedEvidence).not.toBe(second.expectedEvidence);
  });

  it('is unreadable not_json when the body is not JSON', () => {
    for (const body of ['', 'not json', '{"dispatchId":', "{'dispatchId':'d-1'}", '{"a":1}}']) {
      expect(readDispatchMessage(body), body).toEqual({ kind: 'unreadable', reason: 'not_json' });
    }
  });

  it('is unreadable not_an_object when the JSON is an array, null, a number, a string or a boolean', () => {
    for (const body of ['[]', '[{"dispatchId":"d-1","origin":"planner"}]', 'null', '42', '"d-1"', 'true']) {
      expect(readDispatchMessage(body), body).toEqual({ kind: 'unreadable', reason: 'not_an_object' });
    }
  });

  it('is unreadable no_readable_dispatch_id when the dispatchId is missing, and keeps the readable origin', () => {
    expect(read(without(messageFactory(), 'dispatchId'))).toEqual({
      kind: 'unreadable',
      reason: 'no_readable_dispatch_id',
      origin: 'planner',
    });
  });

  it('is unreadable no_readable_dispatch_id when the dispatchId is malformed', () => {
    for (const dispatchId of ['', 'has space', 'd/1', 'x'.repeat(129), 42, null, ['d-1'], 'd-1\n']) {
      const result = read(messageFactory({ dispatchId }));
      expect(result, JSON.stringify(dispatchId)).toMatchObject({ kind: 'unreadable', reason: 'no_readable_dispatch_id' });
      expect(result).not.toHaveProperty('dispatchId');
    }
  });

  it('is unreadable no_readable_dispatch_id without origin when neither is readable', () => {
    expect(read(messageFactory({ dispatchId: 7, origin: 'Planner' }))).toEqual({ kind: 'unreadable', reason: 'no_readable_dispatch_id' });
  });

  it('is unreadable no_readable_origin with the dispatchId when the id is valid but the origin is not', () => {
    for (const origin of ['Planner', 'plan ner', 'planner_1', '', 'p'.repeat(65), 3, null]) {
      expect(read(messageFactory({ origin })), JSON.stringify(origin)).toEqual({
        kind: 'unreadable',
        reason: 'no_readable_origin',
        dispatchId: 'd-2026-0001',
      });
    }
    expect(read(without(messageFactory(), 'origin'))).toEqual({
      kind: 'unreadable',
      reason: 'no_readable_origin',
      dispatchId: 'd-2026-0001',
    });
  });

  it('is invalid with the well-formed target when the id and origin are readable but a field is not', () => {
    const body = messageFactory({ maxHops: -1 });
    expect(read(body)).toEqual({
      kind: 'invalid',
      dispatchId: 'd-2026-0001',
      origin: 'planner',
      target: 'demo-agent',
      errors: [{ field: 'maxHops', message: expect.any(String) }],
      parsed: body,
    });
  });

  it('is invalid with a null target when the target is malformed or missing', () => {
    for (const target of ['Demo Agent', '-agent', '', 'a'.repeat(65), 5]) {
      const result = expectInvalid(read(messageFactory({ target })));
      expect(result.target, JSON.stringify(target)).toBeNull();
      expect(fields(result.errors)).toEqual(['target']);
    }
    const missing = expectInvalid(read(without(messageFactory(), 'target')));
    expect(missing.target).toBeNull();
    expect(fields(missing.errors)).toEqual(['target']);
  });

  it('names nested fields with dotted paths when they are invalid', () => {
    const result = expectInvalid(
      read(
        messageFactory({
          timeouts: { stallAfterSeconds: 0, approvalWaitSeconds: 1.5 },
          expectedEvidence: ['out/a.md', 'out/b.md', '../etc/passwd'],
          delivery: { mode: 'email' },
        }),
      ),
    );
    expect(fields(result.errors).sort()).toEqual(
      ['delivery.mode', 'expectedEvidence.2', 'timeouts.approvalWaitSeconds', 'timeouts.stallAfterSeconds'].sort(),
    );
    expect(result.errors.find((error) => error.field === 'expectedEvidence.2')?.message).toContain('dot_segment');
  });

  it('names the unsafe ref problem when an expected ref is unsafe', () => {
    const cases: Array<[string, string]> = [
      ['/abs', 'absolute'],
      ['a\\b', 'backslash'],
      ['%2e%2e/x', 'dot_segment'],
      ['a//b', 'empty_segment'],
      ['', 'empty'],
      ['a\u0000b', 'control_character'],
      ['%zz', 'bad_percent_encoding'],
      ['a'.repeat(513), 'too_long'],
    ];
    for (const [ref, problem] of cases) {
      const result = expectInvalid(read(messageFactory({ expectedEvidence: ['ok.md', ref] })));
      expect(result.errors, ref).toEqual([{ field: 'expectedEvidence.1', message: expect.stringContaining(problem) }]);
    }
  });

  it('refuses more than 32 expected refs', () => {
    const refs = Array.from({ length: 33 }, (_, i) => `out/f${i}.md`);
    const result = expectInvalid(read(messageFactory({ expectedEvidence: refs })));
    expect(result.errors).toEqual([{ field: 'expectedEvidence', message: expect.stringContaining('32') }]);
  });

  it('refuses a non-array expectedEvidence', () => {
    expect(fields(expectInvalid(read(messageFactory({ expectedEvidence: 'out/report.md' }))).errors)).toEqual(['expectedEvidence']);
  });

  it('refuses an unknown top-level field rather than dropping it', () => {
    const result = expectInvalid(read(messageFactory({ expectedEvidnce: ['out/report.md'] })));
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]?.message).toContain('expectedEvidnce');
  });

  it('refuses an unknown field when it is inside timeouts or delivery', () => {
    const result = expectInvalid(
      read(messageFactory({ timeouts: { stallAfterSeconds: 60, stallSeconds: 5 }, delivery: { mode: 'callback', to: 'x' } })),
    );
    expect(fields(result.errors).sort()).toEqual(['delivery', 'timeouts']);
  });

  it('refuses a hop field when the sender tries to set it', () => {
    expectInvalid(read(messageFactory({ hop: 0 })));
  });

  it('refuses a task when it is not a JSON object', () => {
    for (const task of [[], ['goal'], 'summarise', 42, true, null]) {
      const result = expectInvalid(read(messageFactory({ task })));
      expect(fields(result.errors), JSON.stringify(task)).toEqual(['task']);
    }
    expect(fields(expectInvalid(read(without(messageFactory(), 'task'))).errors)).toEqual(['task']);
  });

  it('accepts an empty task object', () => {
    expect(expectValid(read(messageFactory({ task: {} }))).message.task).toEqual({});
  });

  it('refuses timeouts when they are not whole seconds of at least 1', () => {
    for (const value of [0, -5, 1.5, '600', null]) {
      const result = expectInvalid(read(messageFactory({ timeouts: { deliveryGraceSeconds: value } })));
      expect(fields(result.errors), JSON.stringify(value)).toEqual(['timeouts.deliveryGraceSeconds']);
    }
  });

  it('refuses maxHops when it is negative, fractional or not a number', () => {
    for (const maxHops of [-1, 1.5, '4', null]) {
      expect(fields(expectInvalid(read(messageFactory({ maxHops }))).errors), JSON.stringify(maxHops)).toEqual(['maxHops']);
    }
  });

  it('refuses a malformed parentDispatchId', () => {
    expect(fields(expectInvalid(read(messageFactory({ parentDispatchId: 'not valid' }))).errors)).toEqual(['parentDispatchId']);
  });

  it('reports every invalid field at once when several are wrong', () => {
    const result = expectInvalid(read(messageFactory({ target: 'Bad', task: [], maxHops: -1, delivery: { mode: 'x' } })));
    expect(fields(result.errors).sort()).toEqual(['delivery.mode', 'maxHops', 'target', 'task']);
  });

  it('refuses a task key named __proto__ instead of silently dropping it (regression: zod stripped it while the hash kept it)', () => {
    // `{"__proto__": …}` is ordinary JSON data; JSON.parse keeps it as an own key and the content hash
    // (intake hashes `parsed`) covers it, but zod's record strips it from `message.task`, so the task
    // stored and submitted to the target silently lacks a key the sender wrote.
    const body = '{"dispatchId":"d-1","origin":"planner","target":"demo-agent","task":{"__proto__":{"behavior":"fail"},"goal":"x"}}';
    const result = readDispatchMessage(body);
    expect(result).toMatchObject({ kind: 'invalid', dispatchId: 'd-1', errors: [{ field: 'task.__proto__', message: 'the key "__proto__" is not allowed' }] });
  });
});

describe('DispatchMessageSchema', () => {
  it('parses a message object directly when it is valid', () => {
    const parsed = DispatchMessageSchema.parse(messageFactory({ expectedEvidence: ['a.md'] }));
    expect(parsed.expectedEvidence).toEqual(['a.md']);
    expect(parsed.delivery).toEqual({ mode: 'callback' });
  });

  it('fails with the issue path when a field is invalid', () => {
    const result = DispatchMessageSchema.safeParse(messageFactory({ timeouts: { stallAfterSeconds: 0 } }));
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path)).toEqual([['timeouts', 'stallAfterSeconds']]);
  });
});
