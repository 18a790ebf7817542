import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MUST_BE_ZERO } from '../../census/observations.js';
import { runCensus } from '../../census/census.js';
import { FAULT_KINDS } from '../../census/faults.js';
import { BLOCK_CLASSES, REJECTION_CLASSES } from '../../census/workload.js';
import { uniqueName, testEngines } from '../support/engines.js';

/**
 * Busy loops on every core of a 2-core machine, for the length of the census: `npm test` runs beside
 * other work, and the census must hold with the cores shared. Each loop ends itself when its parent
 * is gone (reparented) or after 15 minutes, so a killed test run leaves none behind.
 */
const HOG = 'const parent = process.ppid, end = Date.now() + 15 * 60_000; for (;;) { for (let i = 0; i < 5e7; i += 1); if (process.ppid !== parent || Date.now() > end) process.exit(0); }';
const hogs: number[] = [];
const CENSUS_LOG = process.env['CENSUS_LOG'];

/**
 * The CI-sized census (issue 13): ~300 dispatches through the whole local platform on the real
 * engines, every fault kind injected, and the checker's verdict on what the system holds afterwards.
 * `npm run census` runs the same at 10,000. It runs with two CPU hogs beside it (defect 13: it failed
 * on a busy machine): one census under load rather than a second one, which would add minutes to
 * `npm test`; a census that holds with the cores shared holds without.
 */
describe('census: nothing lost, nothing doubled, nothing out of order, under every fault', () => {
  beforeAll(() => {
    for (let n = 0; n < 2; n += 1) {
      const hog = spawn(process.execPath, ['-e', HOG], { stdio: 'ignore' });
      if (hog.pid === undefined) throw new Error('a CPU hog did not start');
      hogs.push(hog.pid);
    }
  });
  afterAll(() => {
    for (const pid of hogs.splice(0)) {
      try {
        process.kill(pid);
      } catch {
        // Already gone.
      }
    }
  });

  it('takes ~300 dispatches with every fault kind and every poison class to exactly one outcome each, with two CPU hogs sharing the cores', async () => {
    const { report, drainedInSeconds } = await runCensus({
      dispatches: 300,
      seed: 13,
      faults: FAULT_KINDS,
      engines: testEngines(),
      prefix: uniqueName('census'),
      lateAfterSeconds: 10,
      drainSeconds: 100,
      // CENSUS_LOG=FILE: the census's progress (waves, drain, limit changes), one JSON line each.
      ...(CENSUS_LOG ? { log: (line: Record<string, unknown>) => appendFileSync(CENSUS_LOG, `${JSON.stringify({ at: new Date().toISOString(), ...line })}\n`) } : {}),
    });
    const findings = (check: string) => JSON.stringify(report.findings.filter((finding) => finding.check === check));
    // Soft: every count that is not zero is reported, not only the first.
    for (const key of MUST_BE_ZERO) expect.soft(report[key], `${key}: ${findings(key)}`).toBe(0);
    expect(report.balanced).toBe(true);
    expect(report.sent).toBe(report.dispatches + report.duplicates + report.blocked + report.rejections + report.dlqOnly);
    expect(drainedInSeconds, 'drained before the limit').not.toBeNull();
    // A fault that never fired proves nothing.
    for (const kind of FAULT_KINDS) expect(report.faultsFired[kind], `${kind} in ${JSON.stringify(report.faultsFired)}`).toBeGreaterThan(0);
    // origin_not_allowed needs a sender identity the local API cannot verify (PRINCIPAL_MODE open); the
    // intake use case tests it with crafted SenderIds.
    for (const poisonClass of [...REJECTION_CLASSES, ...BLOCK_CLASSES]) {
      expect(report.poison[poisonClass]?.sent ?? 0, poisonClass).toBeGreaterThan(0);
      expect(report.poison[poisonClass]?.asExpected, poisonClass).toBe(report.poison[poisonClass]?.sent);
    }
    // Every message made to dead-letter came back through the redrive as its dispatch.
    expect(report.dlqRoundTrips.planned).toBeGreaterThan(0);
    expect(report.dlqRoundTrips.asExpected, JSON.stringify(report.dlqRoundTrips)).toBe(report.dlqRoundTrips.planned);
    expect(report.limitChanges.runsOpened).toBeGreaterThan(0);
    expect(report.orphans.detected).toBe(report.orphans.injected);
    expect(report.orphans.maxUnfaultedTicksAfterGrace).toBeLessThanOrEqual(1);
    // Longer than the census's own bounded waits (the late wave's holders up to 300 s, the drain's 100 s,
    // the event log's 120 s): a slow machine then fails an assertion that says what was left, not a
    // bare timeout. It took 64–210 s alone on a 2-core machine, and timed out at 240 s in a full run.
  }, 600_000);
});
