import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The example of packages/worker/README.md, as written: its fenced block is written to a file of its own,
 * run by plain node (no tsx: the package is built JavaScript) in a process of its own, registered as a
 * target, and sent a dispatch.
 */
const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../packages/worker');

/** The first ```js block under "## Example". */
function exampleOf(readme: string): string {
  const section = readme.slice(readme.indexOf('## Example'));
  const block = /```js\n([\s\S]*?)```/.exec(section);
  if (!block?.[1]) throw new Error('no ```js block under "## Example" in packages/worker/README.md');
  return block[1];
}

let t: TestPlatform;
let child: ChildProcess | undefined;
const workDir = mkdtempSync(join(tmpdir(), 'worker-readme-'));

beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(async () => {
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((done) => child?.once('exit', done));
    process.kill(child.pid, 'SIGTERM');
    await exited;
  }
  await t.stop();
  rmSync(workDir, { recursive: true, force: true });
});

describe('the worker kit README', () => {
  it('runs its example as written: a worker that uploads out/report.md and completes, handled by the platform', async () => {
    const example = exampleOf(readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8'));
    expect(example).toContain("from '@dispatch-ledger/worker'");
    expect(example.split('\n').length).toBeLessThanOrEqual(25);

    // A project of its own that has the package installed (a link, as npm workspaces make it).
    mkdirSync(join(workDir, 'node_modules', '@dispatch-ledger'), { recursive: true });
    symlinkSync(PACKAGE_DIR, join(workDir, 'node_modules', '@dispatch-ledger', 'worker'), 'dir');
    writeFileSync(join(workDir, 'package.json'), JSON.stringify({ name: 'readme-example', type: 'module', private: true }));
    writeFileSync(join(workDir, 'worker.mjs'), example);

    const started = spawn(process.execPath, ['worker.mjs'], { cwd: workDir, env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    let stdout = '';
    let stderr = '';
    started.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    started.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const announced = await eventually(
      'the example to print its URL',
      () => {
        if (started.exitCode !== null) throw new Error(`the example exited ${started.exitCode}: ${stderr}`);
        const line = stdout.split('\n').find((candidate) => candidate.startsWith('{'));
        return line ? (JSON.parse(line) as { worker: string; url: string }) : undefined;
      },
    );
    expect(announced.worker).toBe('report-writer');
    expect(announced.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
    await table.putTarget({ name: 'report-writer', kind: 'http', baseUrl: announced.url });
    const dispatchId = uniqueName('readme');
    const goal = 'summarise the incident';
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'report-writer', task: { goal }, expectedEvidence: ['out/report.md'], timeouts: { deliveryGraceSeconds: 5 } }));

    const handled = await t.viewWhen(dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome !== 'pending');
    const report = `# Report\n\n${goal}\n\nDispatch ${dispatchId}, attempt 1.\n`;
    expect(handled.evidence).toMatchObject({ outcome: 'handled', found: ['out/report.md'], missing: [] });
    expect(handled.evidence.files.map((file) => file.sha256)).toEqual([createHash('sha256').update(report).digest('hex')]);
    expect(handled.execution.result?.summary).toBe(`report written: ${goal}`);
    expect(handled.gate.satisfied).toBe(true);
    // Nothing went wrong on the way: the example's default log prints warnings and errors only.
    expect(stderr).toBe('');
  });
});
