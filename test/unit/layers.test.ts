import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * docs/architecture.md "Layers": inside shared/, each file belongs to one layer and imports only its own
 * layer or lower ones; and no import circle among the project's files. Read from the files' own import
 * lines (relative ones: the packages' names point at built output, never at each other's sources).
 */

const root = path.resolve(import.meta.dirname, '../..');
const IMPORT = /^\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gm;
const DYNAMIC = /import\(\s*'(\.[^']+)'\s*\)/g;

const sources = (): string[] =>
  execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((file) => file && !file.endsWith('.test.ts') && !file.endsWith('.d.ts') && !file.startsWith('test/') && !file.includes('/dist/') && !file.startsWith('node_modules/'));

function importsOf(file: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const specs = [...text.matchAll(IMPORT), ...text.matchAll(DYNAMIC)].map((match) => match[1] as string);
  return specs.map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'));
}

/** Lowest first. A file's layer is the first rule its path matches. */
const LAYERS: ReadonlyArray<readonly [string, (file: string) => boolean]> = [
  ['basics', (file) => /^shared\/[^/]+\.ts$/.test(file)],
  ['domain', (file) => file.startsWith('shared/dispatch/') || file.startsWith('shared/events/')],
  ['ports', (file) => file === 'shared/ledger/port.ts' || file.startsWith('shared/targets/') || file.startsWith('shared/principals/')],
  ['repository', (file) => file.startsWith('shared/ledger/')],
  ['use cases', (file) => file.startsWith('shared/usecases/')],
  ['adapters', (file) => file.startsWith('shared/adapters/')],
  ['routes', (file) => file.startsWith('shared/api/')],
];
const layerOf = (file: string): number => LAYERS.findIndex(([, matches]) => matches(file));

describe('layers', () => {
  const files = sources();
  const graph = new Map(files.map((file) => [file, importsOf(file).filter((target) => files.includes(target))]));

  it('puts every file under shared/ in a layer', () => {
    const unplaced = files.filter((file) => file.startsWith('shared/') && layerOf(file) < 0);
    expect(unplaced).toEqual([]);
  });

  it('never imports upward inside shared/ (the domain never imports the ports, the repository, the use cases or the adapters)', () => {
    const upward = [...graph].flatMap(([file, targets]) =>
      file.startsWith('shared/') ? targets.filter((target) => target.startsWith('shared/') && layerOf(target) > layerOf(file)).map((target) => `${file} (${LAYERS[layerOf(file)]?.[0]}) → ${target} (${LAYERS[layerOf(target)]?.[0]})`) : [],
    );
    expect(upward).toEqual([]);
  });

  it('has no import circle among the project files', () => {
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, trail: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        circles.push([...trail.slice(trail.indexOf(file)), file].join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const target of graph.get(file) ?? []) visit(target, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of graph.keys()) visit(file, []);
    expect(circles).toEqual([]);
  });

  it("keeps the state machine's building blocks inside it: only the transition modules use advance and its rules (a caller never patches a state)", () => {
    const INTERNAL = ['advance', 'withFlow', 'withResult', 'withAttention', 'plus', 'bounded', 'resultOf', 'droppedResult'];
    const reaching = [...graph.keys()]
      .filter((file) => !file.startsWith('shared/dispatch/transitions/'))
      .flatMap((file) => {
        const text = readFileSync(path.join(root, file), 'utf8');
        const named = [...text.matchAll(/import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*'[^']*transitions\/core\.js'/g)].flatMap((match) => (match[1] as string).split(',').map((name) => name.replace(/^\s*type\s+/, '').trim()));
        return named.filter((name) => INTERNAL.includes(name)).map((name) => `${file}: ${name}`);
      });
    expect(reaching).toEqual([]);
  });

  it('reads the imports it judges (a check that finds none could not fail)', () => {
    expect([...graph.values()].flat().length).toBeGreaterThan(500);
    expect(graph.get('shared/usecases/submit-attempt.ts')).toContain('shared/ledger/port.ts');
  });
});
