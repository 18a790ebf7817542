import type { Profiler } from 'node:inspector/promises';
import { describe, expect, it } from 'vitest';
import { selfTimes } from '../../bench/cpu-profile.js';

/** The repository's root as a file URL, as V8 reports this repository's scripts. */
const ROOT = new URL('../../', import.meta.url).href;
const frame = (id: number, functionName: string, url: string, lineNumber = 0): Profiler.ProfileNode => ({ id, callFrame: { functionName, url, scriptId: String(id), lineNumber, columnNumber: 0 } });

describe('bench cpu-profile: self time by area (npm run bench:profile-intake)', () => {
  it("sums each sample into its frame's area, leaves idle out, and names our functions by file and line", () => {
    const profile: Profiler.Profile = {
      nodes: [
        frame(1, '(root)', ''),
        frame(2, '(idle)', ''),
        frame(3, 'stateItem', `${ROOT}shared/adapters/state-item.ts`, 11),
        // The same function reached by another call path: a node of its own in the tree, one row in the sums.
        frame(4, 'stateItem', `${ROOT}shared/adapters/state-item.ts`, 11),
        // tsx's sources report line 0: no line in the name then.
        frame(5, 'parseRequest', `${ROOT}packages/protocol/src/requests.ts`),
        frame(6, 'send', `${ROOT}node_modules/@smithy/core/dist-cjs/index.js`),
        frame(7, 'writev', ''),
        frame(8, 'parse', `${ROOT}node_modules/zod/v4/core/parse.js`),
        frame(9, 'emit', 'node:events'),
        frame(10, '(garbage collector)', ''),
        frame(11, '(program)', ''),
        // Not ours: a package's own shared/ folder, and a bench file.
        frame(12, 'helper', `${ROOT}node_modules/some-package/shared/index.js`),
        frame(13, 'drive', `${ROOT}bench/profile-intake.ts`),
      ],
      startTime: 0,
      endTime: 200,
      samples: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 2],
      timeDeltas: [50, 10, 20, 4, 5, 7, 3, 2, 1, 6, 8, 9, 40],
    };
    const { total, areas, ours } = selfTimes(profile);
    expect(total).toBe(75);
    expect(Object.fromEntries(areas)).toEqual({
      'our code (shared/, functions/, packages/)': 34,
      'AWS SDK (@aws-sdk, @smithy)': 5,
      'socket writes (writev)': 7,
      zod: 3,
      "node's HTTP, streams and events": 2,
      'garbage collector': 1,
      'everything else (V8 and native frames, other packages, the bench itself)': 23,
    });
    expect(Object.fromEntries(ours)).toEqual({ 'stateItem shared/adapters/state-item.ts:12': 30, 'parseRequest packages/protocol/src/requests.ts': 4 });
  });
});
