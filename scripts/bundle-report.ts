import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build, type Metafile } from 'esbuild';
import { functionBuildOptions, handlerEntry, KIT_WORKER, LEDGER_FUNCTIONS, PROJECT_ROOT, SDK_IMPORTS_OF, type LedgerFunctionName } from '../infra/bundling.js';

/**
 * `npm run bundle:report`: the size of each function's bundle against a bundle of only the AWS SDK
 * clients that function uses (`SDK_IMPORTS_OF`), both built with the deployed esbuild options. The
 * SDK dominates every bundle, so "≤ 1.2 × SDK-only" bounds what our code and other dependencies add
 * on top of it. Exits 1 when a function is over budget.
 *
 *   --json           one JSON object on stdout instead of the table
 *   --require-time   also time `import()` of each bundle in fresh node processes (median of 7)
 *
 * `measureBundles` and `measureRequireTime` are exported for the cold-start benchmark.
 */

/**
 * The target is 1.2 × SDK-only. Issue 12's hardening (iterative reader and canonicalizer, checked item
 * codecs, the state machine, resolved-address checks) took intake to 1.218 and api to 1.221; until the
 * table adapter is split per function (intake carries every access pattern today), the guard stood at
 * 1.25. The results inbox (issue 14: its six routes, the result body store, ~11 KB minified) took api
 * to 1.267: the guard stood at 1.3. Issue 29's fixes added 4.9 KB minified to the API (slot allotment on
 * a limit change 1.8 KB, the inbox's lease ranges 0.5 KB, attention since and refresh recording 0.8 KB,
 * origin rejections and view conflicts 0.5 KB, a held child's parent 0.4 KB, the rest under 0.3 KB each;
 * measured per input from the esbuild metafile, ad7250c → this change): api 1.306. The guard stands at
 * 1.31 — still a reported miss of the 1.2 target, never a new target: splitting the API function (or the
 * table adapter per function) is the team's decision (docs/performance.md, "Cold start"). Issue 30 serves
 * the API from the protocol's route table: +2,092 B net (the table 2,481 B with its path helper; the
 * route patterns, refs, ids and statuses it replaced −989 B; per input from the metafile): api 1.312,
 * the guard 1.315. The route summaries, statuses and query names stay out of it (ROUTE_DOCS). Issue 33
 * writes the update loop once: +1,891 B net to the api (the repository 740 B; the run-event use case out
 * of the routes +692 B; the use cases' decisions as closures +555 B (redispatch, cancel, inbox); the
 * records' constants +97 B; the state machine split by capability −6 B; per input from the metafile,
 * 0065f1d → 732043b): api 1.318, the guard 1.32. Then each function was made by a factory on its config
 * (`createHandler(config)`, the local platform's settings never through process.env): +864 B (api 1.3195);
 * and the item kinds declared once (item-kinds.ts: key template, stored keys, indexes, TTL rule and
 * fields per kind, the TTL worked out from the rule): +1,107 B (api 765,875 B against 579,608 B: 1.3214;
 * measured with measureBundles, 4347c35 → 4c7c7a5); then the routes' last writes moved into use cases
 * (evidence upload and mark, operator receipt, the task read: usecases/evidence-upload.ts,
 * operator-receipt.ts, task.ts) +640 B: api 766,515 B, 1.3225. The guard 1.325: issue 33 grew the api by
 * 4,502 B in all (the repository and the run-event use case 1,891, the config factories 864, the item
 * declarations 1,107, the route use cases 640), each step measured; splitting the API function is what
 * would bring it back towards 1.2 (docs/performance.md, "Cold start").
 * Issue 35 adds the `durable` target kind, which the API calls like every kind (submission on a
 * redispatch, lookups on a refresh, cancel, approvals): +7,171 B of project code in the api (the adapter
 * 3,421 B; the pieces it shares with the stepfunctions adapter, runtime-runs.ts 2,705 B less the 1,789 B
 * they replaced there; the callback id kept on an approval, run-events.ts and runtime-approvals.ts
 * 1,648 B; registry, keys and routes 1,186 B) and +469 B of SDK (client-lambda's durable commands);
 * per input from the esbuild metafile, dc3dee0 → this change: api 814,172 B against 610,543 B, 1.3335.
 * The guard 1.335; splitting the API function per target kind (or in two: origin and target routes)
 * is what would bring it back towards 1.2.
 * Then fa5b196 (api 814,940 B, 1.3348) → 2026-12-07: +216 B redacting a credential cut at the read bound
 * (http-exchange.ts withoutCutSecret), +18 B givenReason, -17 B elsewhere (clip and printable moved to
 * the protocol's ./text: -257 +257): api 815,160 B, 1.3351. The guard 1.336.
 * 2026-12-07 (measured with measureBundles at each commit): a132f51's not-yet answers 815,225 B; the
 * runtime targets' approvals and cancels made once (runtime-runs.ts tokenApprovals, runStopper) -132 B;
 * a lookup's result body read from the Lambda kit's table +135 B and from an http answer +158 B; printed
 * commands as shell words (shellWord, optionWords) +206 B: api 815,592 B, 1.33584; then a review found
 * zsh's `=word` and control characters in ids unquoted (shellWord's $'…' form and hasControls) +264 B:
 * api 815,856 B, 1.33628. The guard 1.337 (440 B above); splitting the API function is still what would
 * bring it back towards 1.2.
 * 2026-12-08 (measureBundles, 9e0c16a → 8cf841d): a cancel the target answered before its run ended is
 * followed by lookups (cancelLookAt and cancelAwaitsEnd, applied by every transition's flow rules: CI saw
 * a Step Functions cancel wait out its stall window) +650 B: api 816,506 B, 1.33734 (CI's run of 3212263
 * failed this guard at 1.33718). The guard 1.338.
 */
export const BUDGET = 1.338;
/** Contributors listed per function. */
const TOP_CONTRIBUTORS = 6;
/** Runs of each bundle for `--require-time`: odd, so the median is one of the runs. */
const REQUIRE_RUNS = 7;

export interface Contributor {
  /** `@scope/name` or `name` of a package under node_modules; `project` for our own files. */
  readonly name: string;
  /** Bytes of minified output coming from that package's files. */
  readonly bytes: number;
}

export interface FunctionBundleSize {
  readonly bytes: number;
  readonly sdkOnlyBytes: number;
  readonly ratio: number;
  readonly withinBudget: boolean;
  readonly topContributors: readonly Contributor[];
  /** Where the two bundles were written; present only when `measureBundles` was given `outDir` (otherwise they are deleted). */
  readonly files?: { readonly bundle: string; readonly sdkOnly: string };
}

export interface BundleReport {
  readonly measuredAt: string;
  readonly budget: number;
  readonly functions: Readonly<Record<LedgerFunctionName, FunctionBundleSize>>;
}

export interface RequireTime {
  readonly medianMs: number;
  readonly minMs: number;
  readonly maxMs: number;
}

/** The options the shipped bundles are built with (infra/bundling.ts). */
const deployedOptions = functionBuildOptions;

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * The entry of the SDK-only bundle: imports exactly what the function takes from the SDK and keeps
 * it alive, or tree shaking would leave an empty module. Clients are constructed (as the functions'
 * composition roots do at init), so the baseline pays for what construction pulls in too; anything
 * else (e.g. `unmarshall`) is only referenced. Construction opens no connection.
 */
export function sdkOnlyEntry(imports: Readonly<Record<string, readonly string[]>>): string {
  const lines: string[] = [];
  const kept: string[] = [];
  // Aliased imports: two modules may export the same name. Bound once per (module, name), since the
  // document client's DynamoDBClient may also be listed on its own.
  const bound = new Map<string, string>();
  const bind = (module: string, exported: string): string => {
    if (!IDENTIFIER.test(exported)) throw new Error(`SDK_IMPORTS_OF: "${exported}" from ${module} is not an identifier`);
    const key = `${module}\0${exported}`;
    let local = bound.get(key);
    if (local === undefined) {
      local = `sdk${bound.size}_${exported}`;
      bound.set(key, local);
      lines.push(`import { ${exported} as ${local} } from ${JSON.stringify(module)};`);
    }
    return local;
  };
  for (const [module, names] of Object.entries(imports)) {
    for (const exported of names) {
      const local = bind(module, exported);
      if (exported === 'DynamoDBDocumentClient') {
        // The document client has no public constructor: it wraps a DynamoDBClient (its peer dependency).
        kept.push(`${local}.from(new ${bind('@aws-sdk/client-dynamodb', 'DynamoDBClient')}({}))`);
      } else if (exported.endsWith('Client')) {
        kept.push(`new ${local}({})`);
      } else {
        kept.push(local);
      }
    }
  }
  return `${lines.join('\n')}\nexport const kept = [${kept.join(', ')}];\n`;
}

/** `node_modules/@smithy/core/dist-es/x.js` → `@smithy/core`; the innermost node_modules wins for nested installs. */
export function packageOf(input: string): string {
  const segments = input.split(/[\\/]/);
  const at = segments.lastIndexOf('node_modules');
  if (at === -1) return 'project';
  const first = segments[at + 1] ?? '';
  return first.startsWith('@') ? `${first}/${segments[at + 2] ?? ''}` : first;
}

function topContributors(metafile: Metafile, outfile: string): Contributor[] {
  // Output keys are relative to absWorkingDir, the way esbuild wrote them.
  const output = metafile.outputs[path.relative(PROJECT_ROOT, outfile).split(path.sep).join('/')];
  if (!output) throw new Error(`esbuild metafile has no output ${outfile}`);
  const byPackage = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    const name = packageOf(input);
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytesInOutput);
  }
  return [...byPackage]
    .map(([name, bytes]) => ({ name, bytes }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, TOP_CONTRIBUTORS);
}

/**
 * Bundles every function and its SDK-only baseline. The bundles go to a temporary directory under
 * `os.tmpdir()` that is removed afterwards, unless `outDir` is given: then they stay there (as
 * `<name>/index.mjs` and `<name>/sdk-only.mjs`, listed in `files`) for the caller to time or inspect.
 */
export async function measureBundles(options: { readonly outDir?: string } = {}): Promise<BundleReport> {
  const outDir = options.outDir ?? (await mkdtemp(path.join(tmpdir(), 'bundle-report-')));
  try {
    const functions = {} as Record<LedgerFunctionName, FunctionBundleSize>;
    // One function at a time: esbuild is parallel inside, and sequential output reads better on failure.
    for (const name of LEDGER_FUNCTIONS) {
      const bundle = path.join(outDir, name, 'index.mjs');
      const sdkOnly = path.join(outDir, name, 'sdk-only.mjs');
      // metafile stated here, not in deployedOptions, so its type says `built.metafile` is there.
      const built = await build({ ...deployedOptions(), entryPoints: [handlerEntry(name)], outfile: bundle, metafile: true });
      await build({
        ...deployedOptions(),
        // stdin with resolveDir at the root: the entry resolves the SDK from the project's node_modules
        // without a generated file inside the repository.
        stdin: { contents: sdkOnlyEntry(SDK_IMPORTS_OF[name]), resolveDir: PROJECT_ROOT, sourcefile: `sdk-only-${name}.mjs`, loader: 'js' },
        outfile: sdkOnly,
      });
      const bytes = (await stat(bundle)).size;
      const sdkOnlyBytes = (await stat(sdkOnly)).size;
      const ratio = bytes / sdkOnlyBytes;
      functions[name] = {
        bytes,
        sdkOnlyBytes,
        ratio: Math.round(ratio * 1000) / 1000,
        withinBudget: ratio <= BUDGET,
        topContributors: topContributors(built.metafile, bundle),
        ...(options.outDir === undefined ? {} : { files: { bundle, sdkOnly } }),
      };
    }
    return { measuredAt: new Date().toISOString(), budget: BUDGET, functions };
  } finally {
    if (options.outDir === undefined) await rm(outDir, { recursive: true, force: true });
  }
}

/** The kit-based example Lambda worker against an SDK-only bundle of the SDK exports the kit takes (budget 1.2). */
export async function measureKitWorker(): Promise<{ readonly bytes: number; readonly sdkOnlyBytes: number; readonly ratio: number; readonly withinBudget: boolean }> {
  const outDir = await mkdtemp(path.join(tmpdir(), 'bundle-kit-'));
  try {
    const bundle = path.join(outDir, 'worker.mjs');
    const sdkOnly = path.join(outDir, 'sdk-only.mjs');
    await build({ ...deployedOptions(), entryPoints: [KIT_WORKER.entry], outfile: bundle });
    await build({ ...deployedOptions(), stdin: { contents: sdkOnlyEntry(KIT_WORKER.sdkImports), resolveDir: PROJECT_ROOT, sourcefile: 'sdk-only-kit-worker.mjs', loader: 'js' }, outfile: sdkOnly });
    const bytes = (await stat(bundle)).size;
    const sdkOnlyBytes = (await stat(sdkOnly)).size;
    return { bytes, sdkOnlyBytes, ratio: Math.round((bytes / sdkOnlyBytes) * 1000) / 1000, withinBudget: bytes / sdkOnlyBytes <= KIT_WORKER.budget };
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

/**
 * What the handlers' composition roots read at import (they throw without it), with placeholder
 * values; nothing else of this process's environment, so NODE_OPTIONS (tsx's loader, for one) or an
 * AWS profile cannot change what is timed.
 */
const IMPORT_ENV: Readonly<Record<string, string>> = {
  LEDGER_TABLE_NAME: 't',
  EVIDENCE_BUCKET: 'b',
  API_BASE_URL: 'https://127.0.0.1',
  EVENT_BUS_NAME: 'dispatch-ledger',
  AWS_REGION: 'us-east-1',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
};

/**
 * Run in the child: times the `import()` alone (not node's own start-up). Every TCP/TLS connect and
 * UDP send is refused and recorded, before the clock starts, so an import that reaches for the
 * network fails the measurement instead of quietly timing (or sending) traffic. It waits a moment
 * after the import so a connection started asynchronously at init is caught too. A failed import is
 * reported on stdout as well, so the parent can tell "needs the network" from "threw at init".
 */
const CHILD_SCRIPT = `
import net from 'node:net';
import dgram from 'node:dgram';
const attempts = [];
const where = (args) => {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first === null || typeof first !== 'object') return String(first);
  return first.path ?? \`\${first.host ?? first.hostname ?? 'localhost'}:\${first.port}\`;
};
net.Socket.prototype.connect = function () { attempts.push(where(arguments)); throw new Error('network use during import'); };
dgram.Socket.prototype.send = function () { attempts.push('udp'); throw new Error('network use during import'); };
let error = null;
const t = performance.now();
try {
  await import(process.env.BUNDLE_URL);
} catch (e) {
  error = String(e && e.stack ? e.stack : e);
}
const ms = performance.now() - t;
await new Promise((resolve) => setTimeout(resolve, 20));
process.stdout.write(JSON.stringify({ ms, attempts, error }));
process.exit(0);
`;

const execFileAsync = promisify(execFile);

/** One import of `file` in a fresh node process, in milliseconds. */
export async function requireTimeOnce(file: string): Promise<number> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync(process.execPath, ['--input-type=module', '--eval', CHILD_SCRIPT], {
      env: { ...IMPORT_ENV, BUNDLE_URL: pathToFileURL(file).href },
      cwd: path.dirname(file),
      timeout: 60_000,
    }));
  } catch (error) {
    // execFile's message repeats the whole script; what node printed is what helps.
    const stderr = error instanceof Error && 'stderr' in error ? String(error.stderr).trim() : String(error);
    throw new Error(`timing the import of ${file}: node failed: ${stderr}`);
  }
  const result: unknown = JSON.parse(stdout);
  if (
    typeof result !== 'object' || result === null ||
    !('ms' in result) || typeof result.ms !== 'number' ||
    !('attempts' in result) || !Array.isArray(result.attempts) ||
    !('error' in result)
  ) {
    throw new Error(`unexpected output timing ${file}: ${stdout}`);
  }
  if (result.attempts.length > 0) throw new Error(`importing ${file} tried to use the network: ${result.attempts.join(', ')}`);
  if (result.error !== null) throw new Error(`importing ${file} failed: ${String(result.error)}`);
  return result.ms;
}

export function summarize(samples: readonly number[]): RequireTime {
  if (samples.length === 0) throw new RangeError('no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  // Even counts average the middle two; `noUncheckedIndexedAccess` wants the `?? NaN`, which cannot happen here.
  const median = sorted.length % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
  return { medianMs: median, minMs: sorted[0] ?? NaN, maxMs: sorted[sorted.length - 1] ?? NaN };
}

/** `runs` imports of `file`, each in a fresh node process (a cold module graph, as at Lambda INIT). */
export async function measureRequireTime(file: string, runs: number): Promise<RequireTime> {
  if (!Number.isInteger(runs) || runs < 1) throw new RangeError(`runs must be a positive integer, got ${runs}`);
  const samples: number[] = [];
  // Sequential: parallel children would compete for the CPU and time each other.
  for (let i = 0; i < runs; i++) samples.push(await requireTimeOnce(file));
  return summarize(samples);
}

/**
 * Function and baseline runs alternate, so a drift in machine load (another build, a thermal
 * throttle) affects both sides of the ratio alike instead of one of them.
 */
async function interleavedRequireTimes(bundle: string, sdkOnly: string, runs: number): Promise<{ bundle: RequireTime; sdkOnly: RequireTime }> {
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(await requireTimeOnce(bundle));
    theirs.push(await requireTimeOnce(sdkOnly));
  }
  return { bundle: summarize(ours), sdkOnly: summarize(theirs) };
}

const kb = (bytes: number): string => (bytes / 1024).toFixed(1);
const round2 = (ms: number): number => Math.round(ms * 100) / 100;

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)));
  // First column (names) left-aligned, the figures right-aligned.
  const line = (cells: readonly string[]): string =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ').trimEnd();
  return [line(headers), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  const known = new Set(['--json', '--require-time']);
  const unknown = argv.filter((arg) => !known.has(arg));
  if (unknown.length > 0) {
    process.stderr.write(`usage: tsx scripts/bundle-report.ts [--json] [--require-time]\nunknown: ${unknown.join(' ')}\n`);
    return 2;
  }
  const json = argv.includes('--json');
  const requireTime = argv.includes('--require-time');

  // The bundles must outlive measureBundles when they are to be timed.
  const outDir = await mkdtemp(path.join(tmpdir(), 'bundle-report-'));
  try {
    const report = await measureBundles({ outDir });
    const times = new Map<LedgerFunctionName, { bundle: RequireTime; sdkOnly: RequireTime }>();
    if (requireTime) {
      for (const name of LEDGER_FUNCTIONS) {
        const { files } = report.functions[name];
        if (!files) throw new Error('measureBundles kept no files');
        times.set(name, await interleavedRequireTimes(files.bundle, files.sdkOnly, REQUIRE_RUNS));
      }
    }

    if (json) {
      // The documented shape; `files` point into a directory removed on exit, so they are left out.
      const functions = Object.fromEntries(
        LEDGER_FUNCTIONS.map((name) => {
          const { files: _files, ...size } = report.functions[name];
          const time = times.get(name);
          // Only with --require-time; hundredths of a millisecond are already below the noise.
          const ms = (t: RequireTime): RequireTime => ({ medianMs: round2(t.medianMs), minMs: round2(t.minMs), maxMs: round2(t.maxMs) });
          const requireMs = time && {
            requireMs: ms(time.bundle),
            sdkOnlyRequireMs: ms(time.sdkOnly),
            requireRatio: Math.round((time.bundle.medianMs / time.sdkOnly.medianMs) * 1000) / 1000,
          };
          return [name, { ...size, ...requireMs }];
        }),
      );
      process.stdout.write(`${JSON.stringify({ measuredAt: report.measuredAt, budget: report.budget, functions }, null, 2)}\n`);
    } else {
      const headers = ['function', 'bundle KB', 'SDK-only KB', 'ratio', 'within budget'];
      if (requireTime) headers.push('require ms', 'SDK-only ms', 'require ratio');
      const rows = LEDGER_FUNCTIONS.map((name) => {
        const size = report.functions[name];
        const row = [name, kb(size.bytes), kb(size.sdkOnlyBytes), size.ratio.toFixed(3), size.withinBudget ? 'yes' : 'NO'];
        const time = times.get(name);
        if (time) row.push(time.bundle.medianMs.toFixed(1), time.sdkOnly.medianMs.toFixed(1), (time.bundle.medianMs / time.sdkOnly.medianMs).toFixed(3));
        return row;
      });
      const notes = [
        `Bundle size per function vs. a bundle of only the AWS SDK exports it uses (infra/bundling.ts SDK_IMPORTS_OF); budget ratio ≤ ${BUDGET}.`,
        'esbuild with the deployed options (ESM, minified, SDK bundled); KB = 1024 bytes.',
      ];
      if (requireTime) notes.push(`require ms: median of ${REQUIRE_RUNS} imports, each in a fresh node process, function and SDK-only runs alternating.`);
      const breakdown = LEDGER_FUNCTIONS.map(
        (name) => `  ${name.padEnd(10)} ${report.functions[name].topContributors.map((c) => `${c.name} ${kb(c.bytes)}`).join(' · ')}`,
      );
      process.stdout.write(
        `${notes.join('\n')}\n\n${table(headers, rows)}\n\nLargest contributors to each function bundle (KB of minified output; "project" is our own code):\n${breakdown.join('\n')}\n`,
      );
    }
    const kit = await measureKitWorker();
    process.stderr.write(`kit-based Lambda worker (examples/lambda-worker): ${kb(kit.bytes)} KB vs ${kb(kit.sdkOnlyBytes)} KB SDK-only, ratio ${kit.ratio.toFixed(3)} (budget ≤ ${KIT_WORKER.budget}: ${kit.withinBudget ? 'within' : 'OVER'})\n`);
    return Object.values(report.functions).every((size) => size.withinBudget) && kit.withinBudget ? 0 : 1;
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

// Only as a command: the benchmark imports this module for measureBundles and measureRequireTime.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
