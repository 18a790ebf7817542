import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('@dispatch-ledger/protocol (CONTRACT §15)', () => {
  it('imports from plain node ESM (no tsx, no source condition): the built dist answers the run statuses and the id rules', async () => {
    // The snippet runs from the repository root, as a consumer in the workspace would: node resolves the
    // package through node_modules and its `default` export condition, i.e. dist/index.js.
    const snippet = [
      "import { RUN_STATUSES, DISPATCH_ID, isSafeRef, MAX_TIMEOUT_SECONDS } from '@dispatch-ledger/protocol';",
      'console.log(JSON.stringify({ statuses: RUN_STATUSES, id: DISPATCH_ID.test("d-1"), unsafe: isSafeRef("../x"), timeout: MAX_TIMEOUT_SECONDS }));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '--eval', snippet], { cwd: PROJECT_ROOT, env: { PATH: process.env['PATH'] ?? '' } });
    expect(JSON.parse(stdout)).toEqual({
      statuses: ['queued', 'running', 'waiting_for_approval', 'completed', 'failed', 'cancelled'],
      id: true,
      unsafe: false,
      timeout: 30 * 24 * 3600,
    });
  });

  it('imports its schemas from plain node ESM at @dispatch-ledger/protocol/schemas: a run status parses, an unknown one does not', async () => {
    const snippet = [
      "import { runStatusSchema, safeRefSchema } from '@dispatch-ledger/protocol/schemas';",
      'console.log(JSON.stringify([runStatusSchema.safeParse("waiting_for_approval").success, runStatusSchema.safeParse("unknown").success, safeRefSchema.safeParse("out/%2e%2e/x").success]));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '--eval', snippet], { cwd: PROJECT_ROOT, env: { PATH: process.env['PATH'] ?? '' } });
    expect(JSON.parse(stdout)).toEqual([true, false, false]);
  });
});
