import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PRIORITY,
  NOT_BEFORE_MAX_DAYS,
  notBeforeProblem,
  readDispatchMessage,
  type FieldError,
  type ReadMessage,
} from '../../shared/dispatch/message.js';

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
  if (result.kind !== 'valid') throw new Error(`expected a valid message, got ${JSON.stringify(result)}`);
  return result;
}

function expectInvalid(result: ReadMessage) {
  if (result.kind !== 'invalid') throw new Error(`expected an invalid message, got ${JSON.stringify(result)}`);
  return result;
}

const fields = (errors: readonly FieldError[]): string[] => errors.map((error) => error.field);
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('input that broke a writer: CONTRACT v2 §1 fields were refused as unknown', () => {
  it('reads a message that uses every v2 field with their values kept', () => {
    const { message } = expectValid(
      read(messageFactory({ resultDelivery: 'inject', notBefore: '2026-12-02T09:00:00Z', priority: 9, traceparent: TRACEPARENT })),
    );
    expect(message).toMatchObject({ resultDelivery: 'inject', notBefore: '2026-12-02T09:00:00.000Z', priority: 9, traceparent: TRACEPARENT });
  });

  it('applies the v2 defaults when the fields are absent', () => {
    const { message } = expectValid(read(messageFactory()));
    expect(message.resultDelivery).toBe('after_turn');
    expect(message.priority).toBe(5);
    expect(DEFAULT_PRIORITY).toBe(5);
    expect(message.notBefore).toBeUndefined();
    expect(message.traceparent).toBeUndefined();
    expect(Object.keys(message)).not.toContain('notBefore');
    expect(Object.keys(message)).not.toContain('traceparent');
  });
});

describe('input that broke a writer: resultDelivery', () => {
  it('keeps inject and after_turn', () => {
    expect(expectValid(read(messageFactory({ resultDelivery: 'inject' }))).message.resultDelivery).toBe('inject');
    expect(expectValid(read(messageFactory({ resultDelivery: 'after_turn' }))).message.resultDelivery).toBe('after_turn');
  });

  it('reads any other string as after_turn, however long', () => {
    for (const resultDelivery of ['', 'INJECT', 'inject ', 'email', 'x'.repeat(100_000)]) {
      expect(expectValid(read(messageFactory({ resultDelivery }))).message.resultDelivery, resultDelivery.slice(0, 20)).toBe('after_turn');
    }
  });

  it('is invalid when resultDelivery is not a string', () => {
    for (const resultDelivery of [null, 1, true, ['inject'], { mode: 'inject' }]) {
      expect(fields(expectInvalid(read(messageFactory({ resultDelivery }))).errors), JSON.stringify(resultDelivery)).toEqual(['resultDelivery']);
    }
  });
});

describe('input that broke a writer: notBefore', () => {
  it('accepts a UTC instant with or without fractional seconds and gives it in the ledger form', () => {
    const cases: Array<[string, string]> = [
      ['2026-12-02T09:00:00Z', '2026-12-02T09:00:00.000Z'],
      ['2026-12-02T09:00:00.5Z', '2026-12-02T09:00:00.500Z'],
      ['2026-12-02T09:00:00.123456789Z', '2026-12-02T09:00:00.123Z'],
      ['2028-02-29T23:59:59Z', '2028-02-29T23:59:59.000Z'],
      ['2000-01-01T00:00:00Z', '2000-01-01T00:00:00.000Z'],
      ['2099-12-31T23:59:59.999Z', '2099-12-31T23:59:59.999Z'],
    ];
    for (const [notBefore, stored] of cases) expect(expectValid(read(messageFactory({ notBefore }))).message.notBefore, notBefore).toBe(stored);
  });

  it('is invalid when notBefore is not a real UTC instant in 2000..2099', () => {
    for (const notBefore of [
      '2026-02-30T09:00:00Z',
      '2027-02-29T09:00:00Z',
      '2026-12-02T24:00:00Z',
      '2026-12-02T23:59:60Z',
      '2026-12-02T09:60:00Z',
      '2026-13-02T09:00:00Z',
      '2026-12-02T09:00:00+01:00',
      '2026-12-02T09:00:00',
      '2026-12-02T09:00Z',
      '2026-12-02',
      '2026-12-02t09:00:00z',
      ' 2026-12-02T09:00:00Z',
      '1999-12-31T23:59:59Z',
      '2100-01-01T00:00:00Z',
      'tomorrow',
      '',
      1796202000000,
      null,
    ]) {
      const result = expectInvalid(read(messageFactory({ notBefore })));
      expect(fields(result.errors), JSON.stringify(notBefore)).toEqual(['notBefore']);
    }
  });

  it('says why when notBefore is more than 30 days ahead of now, and nothing when it is within', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    expect(NOT_BEFORE_MAX_DAYS).toBe(30);
    expect(notBeforeProblem('2026-12-31T00:00:00Z', now)).toBeUndefined();
    expect(notBeforeProblem('2026-12-31T00:00:00.000Z', now)).toBeUndefined();
    expect(notBeforeProblem('2020-01-01T00:00:00Z', now)).toBeUndefined();
    expect(notBeforeProblem('2026-12-01T00:00:00Z', now)).toBeUndefined();
    expect(notBeforeProblem('2026-12-31T00:00:00.001Z', now)).toMatch(/30 days.*\(too_far_ahead\)$/);
    expect(notBeforeProblem('2099-01-01T00:00:00Z', now)).toContain('too_far_ahead');
  });

  it('says the instant is malformed when notBeforeProblem is given something the reader would refuse', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    for (const notBefore of ['2026-02-30T09:00:00Z', 'soon', '', 'x'.repeat(10_000)]) {
      const problem = notBeforeProblem(notBefore, now);
      expect(problem, notBefore.slice(0, 20)).toContain('not_an_instant');
      expect(problem?.length).toBeLessThanOrEqual(200);
    }
  });
});

describe('input that broke a writer: priority', () => {
  it('keeps every integer from 0 to 9', () => {
    for (let priority = 0; priority <= 9; priority += 1) expect(expectValid(read(messageFactory({ priority }))).message.priority).toBe(priority);
  });

  it('is invalid when priority is out of 0..9, fractional or not a number', () => {
    for (const priority of [-1, 10, 1.5, '5', null, true, 1e999]) {
      const body = priority === 1e999 ? JSON.stringify(messageFactory({ priority: 0 })).replace('"priority":0', '"priority":1e999') : JSON.stringify(messageFactory({ priority }));
      expect(fields(expectInvalid(readDispatchMessage(body)).errors), String(priority)).toEqual(['priority']);
    }
  });
});

describe('input that broke a writer: traceparent', () => {
  it('keeps a W3C version 00 traceparent with any flags', () => {
    for (const traceparent of [TRACEPARENT, '00-00000000000000000000000000000001-0000000000000001-00', '00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-ff']) {
      expect(expectValid(read(messageFactory({ traceparent }))).message.traceparent).toBe(traceparent);
    }
  });

  it('is invalid when the traceparent is not version 00 in the W3C form', () => {
    for (const traceparent of [
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      `${TRACEPARENT}-extra`,
      `${TRACEPARENT}\n`,
      '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1',
      '00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01',
      '',
      42,
      null,
    ]) {
      const result = expectInvalid(read(messageFactory({ traceparent })));
      expect(fields(result.errors), JSON.stringify(traceparent)).toEqual(['traceparent']);
    }
  });
});
