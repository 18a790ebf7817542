import type { ScheduledEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { InvocationReport } from '../../local/runtime/context.js';
import { Scheduler } from '../../local/runtime/scheduler.js';

describe('Scheduler (the local EventBridge schedule)', () => {
  it('invokes every scheduled function once per tick with a Scheduled Event', async () => {
    const seen: Array<{ fn: string; event: ScheduledEvent }> = [];
    const scheduler = new Scheduler(
      [
        { functionName: 'monitor', handler: async (event) => void seen.push({ fn: 'monitor', event }) },
        { functionName: 'other', handler: async (event) => void seen.push({ fn: 'other', event }) },
      ],
      { tickSeconds: 60, region: 'us-east-1' },
    );

    await scheduler.tick(new Date('2026-12-01T10:00:00.123Z'));

    expect(seen.map((entry) => entry.fn).sort()).toEqual(['monitor', 'other']);
    expect(seen[0]?.event).toMatchObject({
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      time: '2026-12-01T10:00:00Z',
      region: 'us-east-1',
      detail: {},
    });
  });

  it('lets a slow invocation overlap the next tick, as an EventBridge schedule does', async () => {
    let running = 0;
    let maxRunning = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const scheduler = new Scheduler(
      [
        {
          functionName: 'monitor',
          handler: async () => {
            running += 1;
            maxRunning = Math.max(maxRunning, running);
            await gate;
            running -= 1;
          },
        },
      ],
      { tickSeconds: 60, region: 'us-east-1' },
    );

    const first = scheduler.tick();
    const second = scheduler.tick();
    release();
    await Promise.all([first, second]);

    expect(maxRunning).toBe(2);
  });

  it('reports a failing invocation and keeps ticking', async () => {
    const reports: InvocationReport[] = [];
    let calls = 0;
    const scheduler = new Scheduler(
      [
        {
          functionName: 'monitor',
          handler: async () => {
            calls += 1;
            throw new Error('table unavailable');
          },
        },
      ],
      { tickSeconds: 60, region: 'us-east-1', onInvocation: (report) => reports.push(report) },
    );

    await scheduler.tick();
    await scheduler.tick();

    expect(calls).toBe(2);
    expect(reports.map((report) => report.outcome)).toEqual(['error', 'error']);
    expect(reports[0]?.error).toBe('Error: table unavailable');
  });

  it('refuses a tick of zero or less', () => {
    expect(() => new Scheduler([], { tickSeconds: 0, region: 'us-east-1' })).toThrow(RangeError);
  });
});
