import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoAgentStats } from '../../local/demo-agent/server.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT §1 v2: a dispatch message's `traceparent` reaches the target as a header. End to end on the
 * local platform: queue → intake → submission → the demo agent, whose /stats says what each
 * `POST /runs` carried.
 */
let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(() => t.stop());

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

const dispatchMessageFactory = (overrides: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('d'),
  origin: 'planner',
  target: 'demo-agent',
  task: { behavior: 'complete', goal: 'follow the trace' },
  ...overrides,
});

const stats = async (): Promise<DemoAgentStats> => (await (await fetch(`${t.platform.demoAgent.url}/stats`)).json()) as DemoAgentStats;

describe('traceparent on the local platform', () => {
  it("forwards a message's traceparent to the target with its submission, and none for a message without one", async () => {
    const traced = dispatchMessageFactory({ traceparent: TRACEPARENT });
    const untraced = dispatchMessageFactory();
    await Promise.all([t.send(JSON.stringify(traced)), t.send(JSON.stringify(untraced))]);
    await Promise.all([
      t.viewWhen(traced.dispatchId, (view) => view.phase === 'submitted'),
      t.viewWhen(untraced.dispatchId, (view) => view.phase === 'submitted'),
    ]);

    const seen = await stats();
    expect(seen.attempts[`${untraced.dispatchId}:1`]?.submissions).toBeGreaterThanOrEqual(1);
    expect(seen.traceparents?.[`${traced.dispatchId}:1`]).toBe(TRACEPARENT);
    expect(seen.traceparents).not.toHaveProperty(`${untraced.dispatchId}:1`);
  });
});
