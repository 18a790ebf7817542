import { build, type BuildOptions } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildExampleWorker, buildFunctionBundles, PROJECT_ROOT } from '../infra/bundling.js';
import { PAGE_BUILD } from '../ui/page-build.js';

/**
 * `npm run build` (after the protocol, client and worker compile with tsc): the packages built from the
 * repository's sources by esbuild — `@dispatch-ledger/cdk` (the construct as ESM and CommonJS, its
 * declarations, and every function's bundle) and `dispatch-ledger` (the CLI and the local platform).
 * Why esbuild for these and tsc for the others: docs/architecture.md "Packages".
 *
 *   tsx scripts/build-packages.ts [cdk|cli]...   (no argument: both)
 */

const CDK = path.join(PROJECT_ROOT, 'packages', 'cdk');

/**
 * What the construct's files may import: its peers, zod, and node. Anything else is bundled or a mistake.
 * The protocol is bundled (the few constants it takes): it is ESM only, and a CommonJS consumer's Jest on
 * node 20 cannot require ESM. Its declarations still name it, so it stays a dependency for the types.
 */
const CDK_EXTERNALS = ['aws-cdk-lib', 'aws-cdk-lib/*', 'constructs', 'zod', 'zod/*'];

/** Fails the build when an output imports a package outside `allowed` (a shared module that started importing the SDK, say). */
function checkImports(outputs: NonNullable<Awaited<ReturnType<typeof build>>['metafile']>['outputs'], allowed: (spec: string) => boolean): void {
  for (const [file, output] of Object.entries(outputs)) {
    const stray = [...new Set(output.imports.filter((entry) => entry.external && !allowed(entry.path)).map((entry) => entry.path))];
    if (stray.length > 0) throw new Error(`${file} imports ${stray.join(', ')}: not a dependency of its package`);
  }
}

/** tsc on a package's tsconfig (declarations only). */
const tsc = (project: string): void => {
  execFileSync(process.execPath, [path.join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], { stdio: 'inherit' });
};

/** The relative imports of a declaration file, as files. */
function declarationImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
    const spec = match[1] ?? '';
    found.push(path.resolve(path.dirname(file), spec.replace(/\.js$/, '.d.ts')));
  }
  return found;
}

/** Removes every declaration file `entry` does not reach: tsc declares each module it compiled. */
function pruneDeclarations(root: string, entry: string): number {
  const reached = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() ?? '';
    if (reached.has(file)) continue;
    if (!existsSync(file)) throw new Error(`${path.relative(root, file)} is imported by a declaration but was not emitted`);
    reached.add(file);
    queue.push(...declarationImports(file));
  }
  const all = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.d.ts')).map((file) => path.join(root, file));
  for (const file of all) if (!reached.has(file)) rmSync(file);
  return reached.size;
}

async function buildCdk(): Promise<void> {
  const dist = path.join(CDK, 'dist');
  rmSync(dist, { recursive: true, force: true });
  await buildFunctionBundles(path.join(dist, 'functions'));
  await buildExampleWorker();
  const common: BuildOptions = {
    entryPoints: [path.join(PROJECT_ROOT, 'infra', 'constructs', 'index.ts')],
    bundle: true,
    platform: 'node',
    target: 'node20',
    external: CDK_EXTERNALS,
    conditions: ['module'],
    // The package's dist/esm/ and dist/cjs/ sit beside dist/functions/ (infra/constructs/ledger-function.ts).
    define: { DISPATCH_LEDGER_FUNCTIONS_DIR: JSON.stringify('../functions/') },
    legalComments: 'none',
    absWorkingDir: PROJECT_ROOT,
    metafile: true,
    logLevel: 'warning',
  };
  const allowed = (spec: string): boolean => spec.startsWith('node:') || CDK_EXTERNALS.some((name) => (name.endsWith('/*') ? spec.startsWith(name.slice(0, -1)) : spec === name));
  const esm = await build({ ...common, format: 'esm', outfile: path.join(dist, 'esm', 'index.js') });
  // CommonJS has no import.meta: its module URL is made from __filename.
  const cjs = await build({
    ...common,
    format: 'cjs',
    outfile: path.join(dist, 'cjs', 'index.cjs'),
    define: { ...common.define, 'import.meta.url': '__ledgerModuleUrl' },
    // "use strict" first: a banner goes before esbuild's own, which then no longer counts as the directive.
    banner: { js: "\"use strict\";\nconst __ledgerModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  });
  checkImports({ ...esm.metafile?.outputs, ...cjs.metafile?.outputs }, allowed);
  // Bundled: the construct's own files and the protocol's, nothing of node_modules (regression: a metric
  // name taken from the functions' metrics module bundled Powertools, which sets process-wide state on import).
  const foreign = Object.keys(esm.metafile?.inputs ?? {}).filter((input) => input.includes('node_modules/'));
  if (foreign.length > 0) throw new Error(`the construct bundles ${foreign.slice(0, 5).join(', ')}${foreign.length > 5 ? ', …' : ''}: import it from a module of its own, or make it a dependency`);

  // Declarations: tsc from the construct's entry, pruned to what it reaches; the same files again
  // under a `commonjs` package.json for a CommonJS consumer (TypeScript reads a .d.ts's format from it).
  tsc(CDK);
  const esmTypes = path.join(dist, 'types', 'esm');
  pruneDeclarations(esmTypes, path.join(esmTypes, 'infra', 'constructs', 'index.d.ts'));
  // A consumer's tsc resolves every package the declarations name: each must be the package's own.
  const manifest = JSON.parse(readFileSync(path.join(CDK, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; peerDependencies?: Record<string, string> };
  const declared = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
  for (const file of readdirSync(esmTypes, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.d.ts'))) {
    // Either quote: tsc writes the import("pkg") types it infers with double quotes.
    for (const match of readFileSync(path.join(esmTypes, file), 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^.'"][^'"]*)['"]/g)) {
      const spec = match[1] ?? '';
      if (!spec.startsWith('node:') && !declared.has(packageName(spec))) throw new Error(`the construct's declarations (${file}) name ${spec}, not a dependency of @dispatch-ledger/cdk`);
    }
  }
  const cjsTypes = path.join(dist, 'types', 'cjs');
  cpSync(esmTypes, cjsTypes, { recursive: true });
  writeFileSync(path.join(cjsTypes, 'package.json'), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
}

const CLI = path.join(PROJECT_ROOT, 'packages', 'cli');

/** The package a bare import names: `@scope/name/sub` → `@scope/name`. */
const packageName = (spec: string): string => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');

/**
 * `dispatch-ledger`: the CLI, the local platform (which runs the real handlers of functions/), the
 * status page and the MCP server, as ESM chunks in `dist/` — one entry per process the CLI starts
 * (`ledger`, the supervisor, fauxqs), the handlers split out and imported when the platform starts
 * them. Every package they import is a dependency of the package (the build checks it), never bundled.
 */
async function buildCli(): Promise<void> {
  const dist = path.join(CLI, 'dist');
  rmSync(dist, { recursive: true, force: true });
  const manifest = JSON.parse(readFileSync(path.join(CLI, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const result = await build({
    entryPoints: {
      ledger: path.join(PROJECT_ROOT, 'cli', 'bin.ts'),
      index: path.join(PROJECT_ROOT, 'cli', 'index.ts'),
      'supervisor-main': path.join(PROJECT_ROOT, 'local', 'supervisor-main.ts'),
      'fauxqs-main': path.join(PROJECT_ROOT, 'local', 'engines', 'fauxqs-main.ts'),
    },
    outdir: dist,
    bundle: true,
    splitting: true,
    // Every chunk beside the entries: modules find the entries, page/ and ../package.json from their own URL.
    chunkNames: '[name]-[hash]',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    define: { DISPATCH_LEDGER_CLI_BUNDLE: 'true' },
    // Folds the define, so the source-only branches (tsx, compiling the page with esbuild) are left out.
    minifySyntax: true,
    legalComments: 'none',
    absWorkingDir: PROJECT_ROOT,
    metafile: true,
    logLevel: 'warning',
  });
  checkImports(result.metafile.outputs, (spec) => spec.startsWith('node:') || packageName(spec) in manifest.dependencies);
  // The status page: its script compiled once, beside the files the server reads.
  const page = path.join(PROJECT_ROOT, 'ui', 'page');
  await build({ ...PAGE_BUILD.options, conditions: [...PAGE_BUILD.options.conditions], target: [...PAGE_BUILD.options.target], entryPoints: [path.join(page, PAGE_BUILD.entry)], outfile: path.join(dist, 'page', 'app.js'), absWorkingDir: PROJECT_ROOT });
  for (const file of ['index.html', 'styles.css', 'favicon.svg']) cpSync(path.join(page, file), path.join(dist, 'page', file));
  // The module entry's declarations, pruned to what it reaches.
  tsc(CLI);
  pruneDeclarations(path.join(dist, 'types'), path.join(dist, 'types', 'cli', 'index.d.ts'));
}

const targets = process.argv.slice(2);
const wanted = (name: string): boolean => targets.length === 0 || targets.includes(name);
if (wanted('cdk')) await buildCdk();
if (wanted('cli')) await buildCli();
