import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoAgentStats } from '../../local/demo-agent/server.js';
import { DEMO_AGENT_TARGET, LIMITED_DEMO_TARGET } from '../../local/platform.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT V3 §8: the demo agent keeps `maxOpen` per target name. The local platform registers two
 * targets at the one agent — `demo-agent` and `demo-agent-limited` (maxConcurrentRuns: 2) — and each
 * gets a base path of its own, so the agent knows which target a run was submitted to. Pinned through
 * `GET /stats` only, so the test holds whatever serves the agent (it is to be rebuilt on the worker kit).
 */

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(() => t.stop());

const stats = async (): Promise<DemoAgentStats> => (await (await fetch(`${t.platform.info.demoAgentUrl}/stats`)).json()) as DemoAgentStats;

const stall = (target: string) => ({ dispatchId: uniqueName('d'), origin: 'planner', target, task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: 600 }, delivery: { mode: 'detached' } });

describe('the demo agent behind the local platform', () => {
  it("keeps maxOpen per target name: demo-agent-limited's runs are not counted under demo-agent", async () => {
    // Three runs that never end for the limited target (two open at most: the third waits for a slot), one for demo-agent.
    const limited = [stall(LIMITED_DEMO_TARGET), stall(LIMITED_DEMO_TARGET), stall(LIMITED_DEMO_TARGET)];
    const plain = stall(DEMO_AGENT_TARGET);
    for (const message of [...limited, plain]) await t.send(JSON.stringify(message));

    await t.viewWhen(plain.dispatchId, (view) => view.phase === 'submitted');
    const views = await Promise.all(limited.map((message) => t.viewWhen(message.dispatchId, (view) => view.phase === 'submitted' || view.submission.waitingFor === 'capacity')));
    expect(views.filter((view) => view.phase === 'submitted')).toHaveLength(2);
    expect(views.filter((view) => view.submission.waitingFor === 'capacity')).toHaveLength(1);

    const seen = await stats();
    expect(seen.maxOpen).toEqual({ [DEMO_AGENT_TARGET]: 1, [LIMITED_DEMO_TARGET]: 2 });
    expect(seen.open).toBe(3);
  });
});
