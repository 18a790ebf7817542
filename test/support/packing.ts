import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { projectRoot } from '../../local/paths.js';

/**
 * What the packaging tests share (CONTRACT §16, README "Use it in your own project"): the five packages
 * packed as a team gets them, fresh projects installed from those tarballs alone, and a user's shell
 * environment. Each packaging file packs into a folder of its own, so the files run side by side.
 */
export const run = promisify(execFile);
export const PACKAGES = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', '@dispatch-ledger/cdk', 'dispatch-ledger'] as const;
export type PackageName = (typeof PACKAGES)[number];

/** The version of a package installed in the repository, as its lock file pins it (a package may export no `./package.json`). */
export const repoVersionOf = (name: string): string => {
  const lock = JSON.parse(readFileSync(join(projectRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  const version = lock.packages[`node_modules/${name}`]?.version;
  if (!version) throw new Error(`${name} is not in package-lock.json`);
  return version;
};

/**
 * Nothing that phones home from a test: no CDK telemetry (and `--no-notices` on each cdk command), no
 * npm update check, and npx never fetching a package it does not find installed (a `ledger` it could not
 * find would be someone else's package from the registry).
 */
const QUIET = { CDK_DISABLE_CLI_TELEMETRY: 'true', NO_UPDATE_NOTIFIER: '1', npm_config_update_notifier: 'false', npm_config_yes: 'false' };
/** The environment of a user's shell: this run's PATH and HOME, none of the test's own variables (no LEDGER_STATE_DIR). */
export const userEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...QUIET, ...(process.env['DISPATCH_LEDGER_CACHE'] ? { DISPATCH_LEDGER_CACHE: process.env['DISPATCH_LEDGER_CACHE'] } : {}) });

/** What `npm pack --json` says of a package it packed. */
export interface PackEntry {
  readonly name: string;
  readonly version: string;
  readonly filename: string;
  readonly files: ReadonlyArray<{ readonly path: string }>;
}

/** A packaging file's work folder, its tarballs once packed, and the times of its installs. */
export interface Packing {
  /** Made at once, so that a file's describe blocks can name their projects in it. */
  readonly work: string;
  /** `npm pack` of the file's packages into the work folder (its beforeAll). */
  pack(): Promise<void>;
  readonly packs: Readonly<Record<string, PackEntry>>;
  /** The tarball of a package, for an `npm install` line. */
  tarball(name: PackageName): string;
  /** `npm install` in a project, timed; an engine warning fails it (every package promises Node.js ≥ 20.19, this run's node). */
  timedInstall(project: string, cwd: string, args: string[]): Promise<void>;
  /** Prints the install times and removes the work folder. */
  dispose(): void;
}

/**
 * A work folder for a packaging file and the `npm pack` of `names` into it. The tarballs are packed from
 * what the `pretest` build made (`--ignore-scripts`: a package's prepack rebuilds its dist/ in place, under
 * the feet of the files that run the built CLI beside this one); the build's determinism makes that the same.
 */
export function packing(label: string, names: readonly PackageName[]): Packing {
  const work = mkdtempSync(join(tmpdir(), `ledger-${label}-`));
  const packed = join(work, 'packed');
  const tarballs: Record<string, string> = {};
  const packs: Record<string, PackEntry> = {};
  const installs: Record<string, number> = {};
  return {
    work,
    packs,
    async pack() {
      mkdirSync(packed);
      const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', packed, ...names.flatMap((name) => ['-w', name])], { cwd: projectRoot, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
      for (const entry of JSON.parse(stdout) as PackEntry[]) {
        packs[entry.name] = entry;
        tarballs[entry.name] = join(packed, entry.filename);
      }
      expect(Object.keys(tarballs).sort()).toEqual([...names].sort());
      console.log(`${label}: packed sizes ${names.map((name) => `${name} ${statSync(tarballs[name] ?? '').size} B`).join(', ')}`);
    },
    tarball(name) {
      const file = tarballs[name];
      if (!file) throw new Error(`${name} was not packed by ${label}`);
      return file;
    },
    async timedInstall(project, cwd, args) {
      const started = Date.now();
      const { stdout, stderr } = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...args], { cwd, env: userEnv(), timeout: 300_000 });
      installs[project] = (Date.now() - started) / 1000;
      expect(`${stdout}${stderr}`).not.toContain('EBADENGINE');
    },
    dispose() {
      console.log(`${label}: npm install times ${Object.entries(installs).map(([project, seconds]) => `${project} ${seconds.toFixed(1)} s`).join(', ')}`);
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** `npm ls` of a project: no path into the repository, and the given packages installed in it. */
export async function installedAlone(cwd: string, names: string[]): Promise<void> {
  const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd, env: userEnv(), maxBuffer: 64 * 1024 * 1024 });
  const paths = stdout.split('\n').filter((line) => line !== '');
  expect(paths.filter((line) => line.startsWith(projectRoot))).toEqual([]);
  for (const name of names) expect(paths).toContain(join(cwd, 'node_modules', name));
}

/** Bytes under a folder. */
export const sizeOf = (dir: string): number => {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
};
