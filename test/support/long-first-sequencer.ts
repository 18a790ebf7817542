import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files that take longest, measured on the 2-core machine in a full `npm test` (seconds, 2026-12-06):
 * started first, so that the run does not end waiting on one of them while the other workers are idle.
 * Only the order of the files depends on this list, never what they test; a file missing from it runs
 * after these, in vitest's own order (by its cached durations, or larger files first on a clean clone).
 */
export const LONG_FILES: Readonly<Record<string, number>> = {
  // Measured beside the others (with its own load it took 124 s alone).
  'test/integration/census.test.ts': 450,
  'test/integration/packaging-cdk-app.test.ts': 150,
  'test/integration/local-cli.test.ts': 140,
  'test/integration/remote-cli.test.ts': 130,
  'test/integration/flow-control.test.ts': 112,
  'test/integration/packaging-node-app.test.ts': 105,
  'test/integration/packaging-typed-app.test.ts': 65,
  'test/integration/stepfunctions-local.test.ts': 57,
  'test/integration/operations.test.ts': 57,
  'test/integration/client.test.ts': 52,
  'test/integration/limit-changes.test.ts': 50,
  'test/integration/monitor-cost.test.ts': 36,
  'test/integration/status-page.test.ts': 35,
  'test/integration/intake.test.ts': 31,
  'test/integration/lifecycle.test.ts': 31,
  'test/infra/bundles.test.ts': 27,
  'test/integration/inbox.test.ts': 24,
};

const secondsOf = (spec: TestSpecification): number => {
  const relative = spec.moduleId.slice(spec.project.config.root.length + 1);
  return LONG_FILES[relative] ?? 0;
};

/** Vitest's sequencer with the longest files first, across projects (the projects share one pool). */
export default class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    // Stable: files of equal weight keep vitest's order.
    return sorted.map((spec, index) => ({ spec, index, seconds: secondsOf(spec) })).sort((a, b) => b.seconds - a.seconds || a.index - b.index).map(({ spec }) => spec);
  }
}
