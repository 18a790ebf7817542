import { describe, expect, it } from 'vitest';
import { build } from 'esbuild';
import { PROJECT_ROOT } from '../../infra/bundling.js';
import { lazy } from '../../shared/lazy.js';

describe('lazy: a module-level value built on its first use', () => {
  it('builds nothing until asked, then builds once and hands out the same value', () => {
    let builds = 0;
    const value = lazy(() => ({ built: (builds += 1) }));
    expect(builds).toBe(0);
    const first = value();
    expect(value()).toBe(first);
    expect(builds).toBe(1);
  });

  it('keeps a built undefined too: a value that is legitimately absent is not rebuilt on every use', () => {
    let builds = 0;
    const value = lazy(() => {
      builds += 1;
      return undefined;
    });
    value();
    value();
    expect(builds).toBe(1);
  });

  it('is left out of a bundle whose code never calls the getter, when the call is marked pure', async () => {
    const entry = [
      "import { lazy } from './shared/lazy.ts';",
      "const unused = /* @__PURE__ */ lazy(() => globalThis.sideEffect('UNUSED SCHEMA'));",
      "const used = /* @__PURE__ */ lazy(() => globalThis.sideEffect('USED SCHEMA'));",
      'export const read = () => used();',
    ].join('\n');
    const built = await build({ stdin: { contents: entry, resolveDir: PROJECT_ROOT, loader: 'ts' }, bundle: true, platform: 'node', format: 'esm', conditions: ['@dispatch-ledger/source', 'module'], write: false, logLevel: 'silent' });
    const text = built.outputFiles.map((file) => file.text).join('');
    expect(text).toContain('USED SCHEMA');
    expect(text).not.toContain('UNUSED SCHEMA');
  });
});
