import type { Profiler } from 'node:inspector/promises';

/**
 * Self time from a V8 CPU profile (`Profiler.stop`), summed by area: what bench/profile-intake.ts prints.
 * "Our code" is this repository's own sources outside node_modules: shared/, functions/ and packages/
 * (the protocol package resolves to its TypeScript sources under the bench's `@dispatch-ledger/source`
 * condition), matched from the repository's root so where the clone lives does not matter.
 */

const ROOT = new URL('..', import.meta.url).href;
const OURS = ['shared/', 'functions/', 'packages/'].map((folder) => `${ROOT}${folder}`);

/** The areas, first match wins (a frame's script URL, or V8's own names for native frames). */
export const AREAS: ReadonlyArray<readonly [string, (url: string, name: string) => boolean]> = [
  ['our code (shared/, functions/, packages/)', (url) => OURS.some((prefix) => url.startsWith(prefix)) && !url.includes('/node_modules/')],
  ['zod', (url) => url.includes('/node_modules/zod/')],
  ['AWS SDK (@aws-sdk, @smithy)', (url) => /\/node_modules\/(@aws-sdk|@smithy)\//.test(url)],
  ['Powertools', (url) => url.includes('/node_modules/@aws-lambda-powertools/')],
  ['socket writes (writev)', (_url, name) => name === 'writev' || name === 'writeUtf8String' || name === 'writeBuffer'],
  ['garbage collector', (_url, name) => name === '(garbage collector)'],
  ["node's HTTP, streams and events", (url) => url.startsWith('node:')],
  ['everything else (V8 and native frames, other packages, the bench itself)', () => true],
];

/**
 * Self time (µs) per area and per function of our code (keyed by name, file and line), idle time left
 * out. Each sample is charged its time delta as V8 records it (the time since the sample before).
 */
export function selfTimes(profile: Profiler.Profile): { total: number; areas: Map<string, number>; ours: Map<string, number> } {
  const byNode = new Map<number, number>();
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, index) => byNode.set(id, (byNode.get(id) ?? 0) + (deltas[index] ?? 0)));
  const areas = new Map<string, number>();
  const ours = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const micros = byNode.get(node.id) ?? 0;
    const { url, functionName, lineNumber } = node.callFrame;
    if (micros === 0 || functionName === '(idle)') continue;
    total += micros;
    const area = AREAS.find(([, matches]) => matches(url, functionName))?.[0] ?? 'everything else';
    areas.set(area, (areas.get(area) ?? 0) + micros);
    if (area === AREAS[0]?.[0]) {
      // tsx's transformed sources report line 0 for every frame: a line only where V8 has one.
      const where = `${functionName || '(anonymous)'} ${url.slice(ROOT.length)}${lineNumber > 0 ? `:${lineNumber + 1}` : ''}`;
      ours.set(where, (ours.get(where) ?? 0) + micros);
    }
  }
  return { total, areas, ours };
}
