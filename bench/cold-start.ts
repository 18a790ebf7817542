import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LEDGER_FUNCTIONS } from '../infra/bundling.js';
import { measureBundles, requireTimeOnce, summarize } from '../scripts/bundle-report.js';
import type { BenchContext, Spread } from './types.js';

/** Fresh node processes importing each function's bundle, interleaved with a bundle of only its SDK clients. */
const REQUIRE_RUNS = 15;

const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** Each function's bundle against an SDK-only bundle: size, and import time in fresh processes. */
export interface ColdStart {
  readonly functions: Record<string, { bytes: number; sdkOnlyBytes: number; sizeRatio: number; requireMs: Spread; sdkOnlyRequireMs: Spread; requireRatio: number }>;
  readonly maxRequireTimeRatio: number;
  readonly maxSizeRatio: number;
}

/** Needs no engine: bundles and imports only. */
export async function coldStart(ctx: Pick<BenchContext, 'log' | 'quick'>): Promise<ColdStart> {
  const outDir = mkdtempSync(path.join(tmpdir(), 'bench-bundles-'));
  try {
    const report = await measureBundles({ outDir });
    const functions: ColdStart['functions'] = {};
    for (const name of LEDGER_FUNCTIONS) {
      const size = report.functions[name];
      if (!size.files) throw new Error('measureBundles kept no files');
      const ours: number[] = [];
      const sdkOnly: number[] = [];
      // Interleaved, each import in a fresh node process: machine noise hits both alike.
      for (let run = 0; run < (ctx.quick ? 3 : REQUIRE_RUNS); run += 1) {
        ours.push(await requireTimeOnce(size.files.bundle));
        sdkOnly.push(await requireTimeOnce(size.files.sdkOnly));
      }
      const requireMs = summarize(ours);
      const sdkOnlyRequireMs = summarize(sdkOnly);
      functions[name] = {
        bytes: size.bytes,
        sdkOnlyBytes: size.sdkOnlyBytes,
        sizeRatio: size.ratio,
        requireMs: { min: requireMs.minMs, median: requireMs.medianMs, max: requireMs.maxMs },
        sdkOnlyRequireMs: { min: sdkOnlyRequireMs.minMs, median: sdkOnlyRequireMs.medianMs, max: sdkOnlyRequireMs.maxMs },
        // The fastest of N fresh processes is the least disturbed by the machine: its ratio is the stable one.
        requireRatio: round(requireMs.minMs / sdkOnlyRequireMs.minMs, 3),
      };
      ctx.log(`cold start: ${name} ${size.bytes} B (${size.ratio}× SDK-only), import min ${requireMs.minMs.toFixed(1)} ms vs ${sdkOnlyRequireMs.minMs.toFixed(1)} ms (median ${requireMs.medianMs.toFixed(1)} vs ${sdkOnlyRequireMs.medianMs.toFixed(1)})`);
    }
    const values = Object.values(functions);
    return { functions, maxRequireTimeRatio: Math.max(...values.map((f) => f.requireRatio)), maxSizeRatio: Math.max(...values.map((f) => f.sizeRatio)) };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}
