/**
 * `npx tsx census/mutation-check.ts [--dispatches N]`: shows the census catches a broken idempotency
 * guard. It takes one guard out of the product — the accepted message's condition (`attribute_not_exists`
 * on the anchor, the dispatchId's first-writer-wins) — runs a census with it gone, puts the file back
 * whatever happens (a signal included), and prints what the census reported. Not part of `npm test`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILE = path.join(ROOT, 'shared/adapters/ledger-table.ts');
const GUARD = "          Item: messageItem(message, this.options.retentionSeconds),\n          ConditionExpression: 'attribute_not_exists(pk)',\n          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',\n";
const BROKEN = "          Item: messageItem(message, this.options.retentionSeconds),\n";

const { values } = parseArgs({ options: { dispatches: { type: 'string', default: '300' }, seed: { type: 'string', default: '1' } } });

const original = readFileSync(FILE, 'utf8');
const at = original.indexOf(GUARD);
if (at === -1 || original.indexOf(GUARD, at + 1) !== -1) throw new Error(`the anchor's condition is not in ${FILE} exactly once: update GUARD`);
const restore = (): void => writeFileSync(FILE, original);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    restore();
    process.exit(130);
  });
}

const out = mkdtempSync(path.join(tmpdir(), 'census-mutation-'));
let printed = '';
try {
  writeFileSync(FILE, original.replace(GUARD, BROKEN));
  const run = spawnSync('npx', ['tsx', 'census/main.ts', '--dispatches', values.dispatches, '--seed', values.seed, '--min-fired', '0', '--drain', '120', '--quiet', '--out', out], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20 * 60_000,
  });
  printed = run.stdout;
  process.stdout.write(`guard taken out: the accepted message's condition (shared/adapters/ledger-table.ts putAcceptedMessage)\n\n${printed}\n`);
  const report = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8')) as { failures: string[] } & Record<string, unknown>;
  // The guard keeps one message per dispatchId: without it the census must see the record stop being
  // true (a message lost, misrouted or run twice), not merely a slow drain.
  const caught = ['lost', 'misrouted', 'unexpected', 'doubleSubmittedAttempts'].filter((key) => Number(report[key] ?? 0) > 0);
  if (caught.length === 0) {
    process.stdout.write('\nThe census did NOT notice the missing guard.\n');
    process.exitCode = 1;
  } else {
    process.stdout.write(`\nThe census noticed (${caught.join(', ')}): ${report.failures.join('; ')}\n`);
  }
} finally {
  restore();
}
