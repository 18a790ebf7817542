import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive } from '../../local/engines/process.js';
import { eventually } from '../support/eventually.js';
import { readmeBlocks } from '../support/readme-blocks.js';
import { installedAlone, packing, run, sizeOf, userEnv } from '../support/packing.js';

/**
 * The packages as a team installs them (CONTRACT §16, README "Use it in your own project"), as a plain
 * node ESM project with the worker, the client and the CLI: the README's commands run as written — `npx
 * ledger local up`, its worker registered with `npx ledger local target add`, its origin's round trip —
 * and `npx ledger local down`, after an `npm ci`, leaves none of the pids.
 * No workspace, no link into the repository, no tsx of ours: one `npm install` of the tarballs per
 * project, from the warm npm cache; its time is printed. The other packaging files: packaging-cdk-app.test.ts
 * (a CDK app with the construct) and packaging-typed-app.test.ts (the five packages'
 * manifests, and a strict TypeScript project against their types).
 */
const packed = packing('packaging-node-app', ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', 'dispatch-ledger']);

beforeAll(() => packed.pack(), 300_000);

afterAll(() => packed.dispose());

describe('2. a plain node project with the worker, the client and the CLI: the README commands as written', () => {
  const app = join(packed.work, 'node-app');
  let blocks: Record<string, string> = {};
  const background: ChildProcess[] = [];

  beforeAll(async () => {
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'node-app', private: true, type: 'module' }));
    const names = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', 'dispatch-ledger'] as const;
    await packed.timedInstall('node app', app, names.map((name) => packed.tarball(name)));
    blocks = readmeBlocks('worker.mjs', 'origin.mjs', 'commands.sh');
    writeFileSync(join(app, 'worker.mjs'), blocks['worker.mjs'] ?? '');
    writeFileSync(join(app, 'origin.mjs'), blocks['origin.mjs'] ?? '');
  }, 300_000);

  afterAll(async () => {
    for (const child of background) if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGTERM');
    // Whatever happened above, the platform started here is stopped (by the installed bin, if it is still there).
    const bin = join(app, 'node_modules', '.bin', 'ledger');
    if (existsSync(join(app, '.ledger', 'local', 'state.json')) && existsSync(bin)) await run(bin, ['local', 'down'], { cwd: app, env: userEnv() }).catch(() => undefined);
  });

  it('installs from the tarballs alone, with no tsx and no esbuild', async () => {
    await installedAlone(app, ['@dispatch-ledger/worker', '@dispatch-ledger/client', 'dispatch-ledger']);
    const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: app, env: userEnv(), maxBuffer: 64 * 1024 * 1024 });
    expect(stdout.split('\n').some((line) => /node_modules\/(tsx|esbuild)$/.test(line))).toBe(false);
    console.log(`packaging: the node app installs ${(sizeOf(join(app, 'node_modules')) / 1e6).toFixed(0)} MB`);
  });

  it('runs the README quick start on a folder with no .ledger yet: up, a dispatch sent with the AWS CLI, check, down', async () => {
    const block = readmeBlocks('quick-start.sh')['quick-start.sh'] ?? '';
    expect(existsSync(join(app, '.ledger'))).toBe(false);
    // As a person types it, except that the check is asked again until the ledger has taken the message
    // from its queue (a person runs it a moment later): the block's own line, retried.
    const check = 'npx ledger check d-1';
    const checkLine = block.split('\n').find((line) => line.startsWith(check));
    expect(checkLine).toBeDefined();
    const script = block.replace(checkLine ?? '', `for try in $(seq 60); do ${check} > check.out && break; sleep 0.5; done; cat check.out`);
    const { stdout } = await run('sh', ['-ec', script], { cwd: app, env: userEnv(), timeout: 240_000 });
    const info = JSON.parse(readFileSync(join(app, '.ledger', 'local.json'), 'utf8')) as { dispatchQueueUrl: string };
    expect(info.dispatchQueueUrl).toMatch(/^http:\/\/sqs\.us-east-1\.localhost:\d+\//);
    expect(stdout).toContain('d-1');
    expect(stdout).toMatch(/stopped \d+ processes/);
    expect(existsSync(join(app, '.ledger', 'local', 'state.json'))).toBe(false);
  }, 300_000);

  it('runs the README commands: up, the worker registered, the origin\'s round trip; down after an npm ci leaves none of the pids up started', async () => {
    const commands = (blocks['commands.sh'] ?? '').split('\n').filter((line) => line.trim() !== '');
    expect(commands[0]).toBe('npx ledger local up --detach');
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const said: Record<string, string> = {};
    let pids: number[] = [];
    for (const [index, written] of commands.entries()) {
      // The worker's port: a free one of this run rather than the README's 8787.
      const line = written.replaceAll('8787', String(port));
      if (line.endsWith('&')) {
        const child = spawn('sh', ['-c', line.slice(0, -1).trim()], { cwd: app, env: userEnv(), detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
        background.push(child);
        let out = '';
        child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
        await eventually('the worker to print its URL', () => (out.includes(`"url":"http://127.0.0.1:${port}"`) ? true : undefined), { timeoutMs: 30_000 });
        continue;
      }
      if (line === 'npx ledger local down') {
        const state = JSON.parse(readFileSync(join(app, '.ledger', 'local', 'state.json'), 'utf8')) as { pids: Record<string, number> };
        pids = Object.values(state.pids);
        expect(pids.length).toBeGreaterThanOrEqual(4);
        // An npm ci in between: the state is in the project, not in node_modules.
        await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, env: userEnv(), timeout: 300_000 });
      }
      const { stdout } = await run('sh', ['-c', line], { cwd: app, env: userEnv(), timeout: 240_000 });
      said[`${index}`] = stdout;
    }
    // The platform kept its state in the project, git-ignored, never in node_modules.
    expect(readFileSync(join(app, '.ledger', 'local', '.gitignore'), 'utf8').split('\n')).toContain('*');
    expect(said['2']).toContain(`added local target report-writer → http://127.0.0.1:${port}`);
    const printed = JSON.parse((said['3'] ?? '').trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(printed).toMatchObject({ evidence: 'handled', summary: 'report written: write the report', acked: 1 });
    expect(said['4']).toMatch(/^stopped \d+ processes/);
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
  }, 600_000);
});
