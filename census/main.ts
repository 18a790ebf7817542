import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MUST_BE_ZERO, type CensusReport } from './observations.js';
import { runCensus, type CensusRun } from './census.js';
import { FAULT_KINDS, parseFaultList } from './faults.js';

/**
 * `npm run census [-- --dispatches N --seed S --faults LIST --drain SECONDS --late SECONDS]`: one census
 * on engines of its own; writes census/report.json and docs/reliability.md and prints the table.
 * Exits 1 when any count that must be zero is not, or a fault kind fired fewer than --min-fired times.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const { values } = parseArgs({
  options: {
    dispatches: { type: 'string', default: '10000' },
    seed: { type: 'string', default: '1' },
    faults: { type: 'string', default: 'all' },
    drain: { type: 'string', default: '600' },
    late: { type: 'string' },
    'min-fired': { type: 'string', default: '20' },
    quiet: { type: 'boolean', default: false },
    /** Where report.json and reliability.md go instead of census/ and docs/ (the mutation check's scratch runs). */
    out: { type: 'string' },
  },
});

const dispatches = Number(values.dispatches);
const seed = Number(values.seed);
if (!Number.isInteger(dispatches) || dispatches < 1) throw new RangeError(`--dispatches must be a positive integer, got ${values.dispatches}`);
if (!Number.isInteger(seed)) throw new RangeError(`--seed must be an integer, got ${values.seed}`);
const faults = parseFaultList(values.faults);
const minFired = Number(values['min-fired']);
// Late duplicates "after minutes" at scale; after the first wave is in, at any size.
const lateAfterSeconds = values.late !== undefined ? Number(values.late) : dispatches >= 5_000 ? 120 : 10;

const run = await runCensus({
  dispatches,
  seed,
  faults,
  lateAfterSeconds,
  drainSeconds: Number(values.drain),
  log: (line) => {
    if (!values.quiet) process.stderr.write(`${JSON.stringify(line)}\n`);
  },
});

const failures = verdict(run.report, faults, minFired);
const document = { ...run.report, timing: run.timing, durationSeconds: run.durationSeconds, drainedInSeconds: run.drainedInSeconds, failures };
const reportDir = values.out ?? join(ROOT, 'census');
const docDir = values.out ?? join(ROOT, 'docs');
mkdirSync(reportDir, { recursive: true });
writeFileSync(join(reportDir, 'report.json'), `${JSON.stringify(document, null, 2)}\n`);
/** Everything after this line of docs/reliability.md is written by hand; the census rewrites only what comes before it. */
const HAND_WRITTEN_MARKER = '<!-- Written by hand below this line: npm run census keeps it. -->';

// What follows the marker in the doc is written by hand (e.g. its Retention section): kept as it is.
const docFile = join(docDir, 'reliability.md');
const previous = existsSync(docFile) ? readFileSync(docFile, 'utf8') : '';
const handWritten = previous.includes(HAND_WRITTEN_MARKER) ? `\n${previous.slice(previous.indexOf(HAND_WRITTEN_MARKER))}` : '';
writeFileSync(docFile, `${reliabilityDoc(run, failures, { faults: values.faults, minFired })}${handWritten}`);
process.stdout.write(`${table(run)}\n`);
if (failures.length > 0) {
  process.stdout.write(`\nFAILED:\n${failures.map((failure) => `- ${failure}`).join('\n')}\n`);
  process.exitCode = 1;
}

function verdict(report: CensusReport, enabled: readonly string[], atLeast: number): string[] {
  const failures: string[] = [];
  for (const key of MUST_BE_ZERO) if (report[key] !== 0) failures.push(`${key}: ${report[key]}`);
  if (!report.balanced) failures.push('sent ≠ dispatches + duplicates + blocked + rejections + DLQ-only');
  if (run.drainedInSeconds === null) failures.push('the census did not drain: no progress for half of --drain seconds, or not done by 3 × --drain');
  const trips = report.dlqRoundTrips;
  if (enabled.includes('dlq_round_trip') && trips.asExpected !== trips.planned) failures.push(`DLQ round trips: ${trips.asExpected} of ${trips.planned} came back as their dispatch (${trips.redriven} redriven)`);
  for (const kind of enabled) {
    const fired = report.faultsFired[kind] ?? 0;
    if (fired < atLeast) failures.push(`fault ${kind} fired ${fired} times (< ${atLeast})`);
  }
  return failures;
}

function table({ report, durationSeconds, drainedInSeconds }: CensusRun): string {
  const rows: Array<[string, string | number]> = [
    ['seed', report.seed],
    ['sent', report.sent],
    ['dispatches', report.dispatches],
    ['duplicates', report.duplicates],
    ['blocked', report.blocked],
    ['rejections', report.rejections],
    ['DLQ-only', report.dlqOnly],
    ['sent = dispatches + duplicates + blocked + rejections + DLQ-only', report.balanced ? 'yes' : 'NO'],
    ...MUST_BE_ZERO.map((key): [string, number] => [key, report[key]]),
    ['repeated same-key submissions (retries; not failures)', report.repeatedSubmissions],
    ['injected orphans detected', `${report.orphans.detected} / ${report.orphans.injected}`],
    ['most ticks after grace (all / that had its shard to read)', `${report.orphans.maxTicksAfterGrace} / ${report.orphans.maxUnfaultedTicksAfterGrace}`],
    ['orphans found N ticks after grace (N: count)', Object.entries(report.orphans.ticksAfterGrace).map(([ticks, n]) => `${ticks}: ${n}`).join(', ') || 'none'],
    ['limited target: limit changes / runs opened / most open at once', `${report.limitChanges.changes} / ${report.limitChanges.runsOpened} / ${report.limitChanges.maxOpen}`],
    ['DLQ round trips: planned / redriven / back as their dispatch', `${report.dlqRoundTrips.planned} / ${report.dlqRoundTrips.redriven} / ${report.dlqRoundTrips.asExpected}`],
    ['events (distinct)', report.events],
    ['drained in (s)', drainedInSeconds ?? 'not drained'],
    ['census took (s)', durationSeconds],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = ['| check | value |', '| --- | --- |', ...rows.map(([name, value]) => `| ${name.padEnd(width)} | ${value} |`)];
  lines.push('', '| poison class (§1) | sent | came out as itself |', '| --- | --- | --- |', ...Object.entries(report.poison).map(([name, { sent, asExpected }]) => `| ${name} | ${sent} | ${asExpected} |`));
  lines.push('', '| fault kind | fired |', '| --- | --- |', ...FAULT_KINDS.map((kind) => `| ${kind} | ${report.faultsFired[kind] ?? 0} |`));
  return lines.join('\n');
}

function reliabilityDoc(result: CensusRun, failures: readonly string[], args: { faults: string | undefined; minFired: number }): string {
  const { report } = result;
  return [
    '# Reliability: the census',
    '',
    '_Generated by `npm run census` — do not edit by hand, except below the marker after the census (Retention)._',
    '',
    `Command: \`npm run census -- --dispatches ${dispatches} --seed ${report.seed} --faults ${args.faults ?? 'all'}\` (late wave after ${lateAfterSeconds} s).`,
    `Verdict: **${failures.length === 0 ? 'pass' : 'FAIL'}**${failures.length > 0 ? ` — ${failures.join('; ')}` : ''}.`,
    '',
    'Every acknowledged send must come out exactly once as a dispatch, a duplicate, a blocked dispatch, a',
    'rejection or a DLQ entry; nothing may appear that was never sent; at most one run per dispatch attempt',
    'at the target; no status regression in any dispatch\'s events; no event without a committed change;',
    'every injected orphan found ≤ 1 tick after its grace window among the ticks that had its shard to read (no fault,',
    'within their budget, not overlapping another tick), and no other; no run opened at the limited target beyond the',
    'limit in force while it was raised and lowered; every message made to dead-letter redriven and back as its dispatch.',
    `Every fault kind must fire ≥ ${args.minFired} times.`,
    '',
    table(result),
    '',
    '## Timing (seconds unless named)',
    '',
    '| clock | value |',
    '| --- | --- |',
    ...Object.entries(result.timing).map(([name, value]) => `| ${name} | ${value} |`),
    '',
    report.findings.length > 0 ? '## First findings\n' : '',
    ...report.findings.map((finding) => `- ${finding.check} \`${finding.id}\`: ${finding.detail}`),
    '',
  ].join('\n');
}
