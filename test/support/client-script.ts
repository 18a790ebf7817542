import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../local/paths.js';
import { writeState } from '../../local/state.js';
import { uniqueName } from './engines.js';
import type { TestPlatform } from './platform.js';

/** @dispatch-ledger/client from a plain node ESM script (no tsx), as an origin's own code would run it. */
const run = promisify(execFile);

/** A state directory that `local: true` finds the platform by: its state written as `ledger local up` writes it (the credentials file under --sigv4 is named in it). */
export function stateDirOf(t: TestPlatform): string {
  const stateDir = mkdtempSync(join(tmpdir(), 'ledger-client-'));
  writeState(stateDir, { status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: {}, info: t.platform.info, logDir: stateDir, invocationLog: join(stateDir, 'invocations.log') });
  return stateDir;
}

/**
 * An origin's round trip as a plain node ESM script: dispatch (to $TARGET, default the demo agent, with
 * the task in $TASK), check until handled, `inbox.deliver`, and a 404. The packaging test runs it in a
 * fresh project.
 */
export const ORIGIN_SCRIPT = `
import { createLedgerClient, isLedgerApiError } from '@dispatch-ledger/client';
const dispatchId = process.env.DISPATCH_ID;
const ledger = createLedgerClient({ origin: 'planner', local: true });
await ledger.dispatch({ dispatchId, target: process.env.TARGET ?? 'demo-agent', task: JSON.parse(process.env.TASK ?? '{"behavior":"complete"}'), expectedEvidence: ['out/report.md'], resultDelivery: 'inject' });
let view;
for (let tries = 0; tries < 240; tries += 1) {
  view = await ledger.check(dispatchId).catch(() => undefined);
  if (view && view.evidence.outcome === 'handled' && view.result) break;
  await new Promise((resolve) => setTimeout(resolve, 250));
}
const seen = [];
const outcome = await ledger.inbox.deliver({ mode: 'inject', max: 10, waitSeconds: 5 }, async (results) => { seen.push(...results.map((result) => result.dispatchId)); });
const after = await ledger.check(dispatchId);
let missing;
try { await ledger.check('no-such'); } catch (error) { missing = { api: isLedgerApiError(error), status: error.status }; }
ledger.close();
console.log(JSON.stringify({ evidence: view.evidence.outcome, outcome, seen, ownerDelivery: { state: after.ownerDelivery.state, basis: after.ownerDelivery.basis }, missing }));
`;


/** The round trip of docs/protocol.md §15 from a plain node script finding `t` with `local: true`: what it printed. */
export async function clientRoundTrip(t: TestPlatform): Promise<{ readonly dispatchId: string; readonly printed: unknown }> {
  const stateDir = stateDirOf(t);
  try {
    const dispatchId = uniqueName('d-client');
    const { stdout } = await run(process.execPath, ['--input-type=module', '--eval', ORIGIN_SCRIPT], {
      cwd: projectRoot,
      env: { PATH: process.env['PATH'] ?? '', LEDGER_STATE_DIR: stateDir, DISPATCH_ID: dispatchId },
      timeout: 120_000,
    });
    return { dispatchId, printed: JSON.parse(stdout) as unknown };
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** What the round trip prints when every step holds. */
export const roundTripped = (dispatchId: string) => ({
  evidence: 'handled',
  outcome: { claimed: 1, acked: 1, leaseLost: false, notAcked: [] },
  seen: [dispatchId],
  ownerDelivery: { state: 'confirmed', basis: 'origin_ack' },
  missing: { api: true, status: 404 },
});
