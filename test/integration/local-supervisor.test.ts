import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopLeftovers, stopLocal } from '../../cli/local.js';
import { nodeArgsOf } from '../../local/entry-points.js';
import { isAlive, stopPid } from '../../local/engines/process.js';
import { readState } from '../../local/state.js';
import { eventually } from '../support/eventually.js';

/**
 * The supervisor leaves no engine behind, however it is stopped. Engines are spawned detached, each
 * writing into `<state>/logs/`: a process whose stdout is there is one the platform started.
 */
const dirs: string[] = [];
afterAll(async () => {
  // Whatever failed above, nothing this file started outlives it.
  for (const dir of dirs) {
    await Promise.all(writersInto(dir).map((pid) => stopPid(pid, 1_000)));
    // The stand-in supervisor's engine (last test), if down left it.
    const engine = join(dir, 'state.json.engine');
    if (existsSync(engine)) await stopPid(Number(readFileSync(engine, 'utf8')), 1_000);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The pids whose stdout is a file under `dir` (Linux /proc). */
function writersInto(dir: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/1`).startsWith(dir);
      } catch {
        return false;
      }
    })
    .map(Number);
}

function startSupervisor(): { stateDir: string; pid: number } {
  const stateDir = mkdtempSync(join(tmpdir(), 'ledger-supervisor-'));
  dirs.push(stateDir);
  const child = spawn(process.execPath, [...nodeArgsOf('supervisor-main'), '--state-dir', stateDir, '--tick', '60'], { detached: true, stdio: 'ignore' });
  child.unref();
  if (child.pid === undefined) throw new Error('the supervisor did not start');
  return { stateDir, pid: child.pid };
}

describe('the local supervisor', () => {
  it('stopped while it is starting, stops every engine it had spawned (regression: it exited at once and left them running, recorded nowhere)', async () => {
    const { stateDir, pid } = startSupervisor();
    // An engine spawned, the platform not yet ready.
    await eventually('an engine spawned', () => (existsSync(join(stateDir, 'logs', 'dynamodb-local.log')) ? true : undefined), { timeoutMs: 60_000, intervalMs: 20 });
    expect(readState(stateDir)?.status).toBe('starting');
    process.kill(pid, 'SIGTERM');
    await eventually('the supervisor exited', () => (isAlive(pid) ? undefined : true), { timeoutMs: 120_000 });
    expect(writersInto(stateDir)).toEqual([]);
  });

  it("killed with -9, leaves its engines' pids recorded, and the next up stops them first (regression: up cleared the state and they ran on)", async () => {
    const { stateDir, pid } = startSupervisor();
    const recorded = await eventually('every engine recorded', () => {
      const pids = readState(stateDir)?.pids ?? {};
      return ['dynamodbLocal', 'fauxqs', 'moto'].every((role) => pids[role] !== undefined) ? pids : undefined;
    }, { timeoutMs: 60_000, intervalMs: 20 });
    process.kill(pid, 'SIGKILL');
    await eventually('the supervisor gone', () => (isAlive(pid) ? undefined : true));
    const engines = [recorded.dynamodbLocal, recorded.fauxqs, recorded.moto];
    expect(engines.every((engine) => engine !== undefined && isAlive(engine))).toBe(true);

    const stopped = await stopLeftovers(stateDir);
    expect([...stopped].sort()).toEqual([...engines].sort());
    expect(writersInto(stateDir)).toEqual([]);
    expect(readState(stateDir)).toBeUndefined();
  });

  it('down stops an engine the supervisor recorded after down read the state (regression: down stopped the list it read first, then cleared the state that named the rest)', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'ledger-late-engine-'));
    dirs.push(stateDir);
    // A stand-in supervisor (its command line carries the marker): on SIGTERM it spawns an engine-like
    // process (marker fauxqs-main), records it, and goes without stopping it — as one killed at the end of
    // its grace would leave it.
    const script = join(stateDir, 'supervisor-main.cjs');
    writeFileSync(script, `
      const { spawn } = require('node:child_process');
      const { readFileSync, writeFileSync } = require('node:fs');
      const file = process.argv[2];
      process.on('SIGTERM', () => {
        const engine = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'fauxqs-main'], { detached: true, stdio: 'ignore' });
        engine.unref();
        const state = JSON.parse(readFileSync(file, 'utf8'));
        writeFileSync(file, JSON.stringify({ ...state, pids: { ...state.pids, fauxqs: engine.pid } }));
        writeFileSync(file + '.engine', String(engine.pid));
        process.exit(0);
      });
      setInterval(() => {}, 1000);
      writeFileSync(file + '.listening', '');
    `);
    const file = join(stateDir, 'state.json');
    const fake = spawn(process.execPath, [script, file], { detached: true, stdio: 'ignore' });
    fake.unref();
    const pid = fake.pid ?? 0;
    writeFileSync(file, JSON.stringify({ status: 'starting', pid, startedAt: new Date().toISOString(), pids: { supervisor: pid }, logDir: join(stateDir, 'logs'), invocationLog: join(stateDir, 'invocations.jsonl') }));
    await eventually('the stand-in listening for SIGTERM', () => (existsSync(`${file}.listening`) ? true : undefined));

    const stopped = await stopLocal(stateDir);

    const late = stopped.find((candidate) => candidate !== pid);
    expect(stopped).toContain(pid);
    expect(late).toBeDefined();
    expect(isAlive(late ?? 0)).toBe(false);
    expect(readState(stateDir)).toBeUndefined();
  });
});
