import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive, spawnEngine, stopPid, waitUntilReady } from '../../local/engines/process.js';

/**
 * An engine that does not come up in time. Regression: only DynamoDB Local's start stopped it; a fauxqs
 * or moto slow to answer on a loaded machine failed the start and stayed running, detached, its pid
 * recorded nowhere (`startEngines` only tracks engines that became ready).
 */
describe('waitUntilReady', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-start-'));
  const spawned: number[] = [];
  afterAll(async () => {
    await Promise.all(spawned.map((pid) => stopPid(pid, 500)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops an engine that was not ready in time before it throws', async () => {
    const engine = spawnEngine('idle', process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { logFile: join(dir, 'idle.log') });
    spawned.push(engine.pid);
    let probes = 0;
    const never = async (): Promise<boolean> => {
      probes += 1;
      return false;
    };
    await expect(waitUntilReady(engine, never, 300)).rejects.toThrow(/idle was not ready after 300 ms/);
    expect(probes).toBeGreaterThan(0);
    expect(isAlive(engine.pid)).toBe(false);
  });
});
