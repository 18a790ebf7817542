import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/bundling.js';

/**
 * What the last `npm run build` was made from, so that `npm test` and `npm start` right after `npm ci`
 * (whose `prepare` just built) do not build the same files again:
 *
 *   tsx scripts/build-stamp.ts write   after a build: the digest of its inputs, in node_modules/.cache
 *   tsx scripts/build-stamp.ts check   exit 0 when the inputs are what the last build was made from and
 *                                      its outputs are there; exit 1 otherwise (then the caller builds)
 *
 * The inputs are every file git tracks or would track, except those no build reads (tests, docs, the
 * bench, Markdown); outside a git checkout there is no stamp and every check asks for a build.
 */
const STAMP = path.join(PROJECT_ROOT, 'node_modules', '.cache', 'dispatch-ledger', 'build-stamp.json');
const NOT_READ_BY_THE_BUILD = /^(test|docs|bench|\.ci)\/|\.md$/;
/** What the build leaves: a check with any of these missing asks for a build. */
const OUTPUTS = ['packages/protocol/dist', 'packages/client/dist', 'packages/worker/dist', 'packages/cdk/dist', 'packages/cli/dist', 'examples/lambda-worker/dist'];

function inputsDigest(): string | undefined {
  let listed: string;
  try {
    listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: PROJECT_ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
  const hash = createHash('sha256');
  for (const file of listed.split('\0').filter((name) => name !== '' && !NOT_READ_BY_THE_BUILD.test(name)).sort()) {
    const full = path.join(PROJECT_ROOT, file);
    // A tracked file deleted in the working tree is an input too: its absence is hashed.
    hash.update(file).update('\0').update(existsSync(full) ? readFileSync(full) : '<deleted>').update('\0');
  }
  hash.update(process.version);
  return hash.digest('hex');
}

const mode = process.argv[2];
if (mode === 'write') {
  const digest = inputsDigest();
  if (digest) {
    mkdirSync(path.dirname(STAMP), { recursive: true });
    writeFileSync(STAMP, JSON.stringify({ digest }));
  }
} else if (mode === 'check') {
  const digest = inputsDigest();
  const stamped = existsSync(STAMP) ? (JSON.parse(readFileSync(STAMP, 'utf8')) as { digest?: string }).digest : undefined;
  const fresh = digest !== undefined && digest === stamped && OUTPUTS.every((output) => existsSync(path.join(PROJECT_ROOT, output)));
  if (fresh) process.stdout.write('build: up to date with its sources (scripts/build-stamp.ts)\n');
  process.exit(fresh ? 0 : 1);
} else {
  process.stderr.write('usage: tsx scripts/build-stamp.ts write|check\n');
  process.exit(2);
}
