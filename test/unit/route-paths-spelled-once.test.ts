import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROUTES, TARGET_ROUTES } from '@dispatch-ledger/protocol';
import { projectRoot } from '../../local/paths.js';

/**
 * Issue 30's rule: nothing in the repository but `@dispatch-ledger/protocol` declares a route path. Every
 * other module fills the table's entries (routePath, routeUrl) or names them; a quoted path that starts
 * with one of the table's first segments, outside a comment, is a route spelled again.
 */
const FIRST_SEGMENTS = [...new Set([...Object.values(ROUTES), ...Object.values(TARGET_ROUTES)].map((spec) => spec.path.split('/')[1]))];
const SPELLED = new RegExp(`['"\`]/(${FIRST_SEGMENTS.join('|')})(/|\\?|['"\`])`);
const FOLDERS = ['cli', 'ui', 'shared', 'functions', 'local', 'infra', 'census', 'bench', 'examples', 'packages/worker/src', 'packages/client/src'];

function sources(folder: string): string[] {
  return readdirSync(join(projectRoot, folder), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.parentPath.includes('node_modules'))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('route paths are spelled once, in the protocol', () => {
  it('finds no quoted route path outside packages/protocol (comments aside)', () => {
    expect(FIRST_SEGMENTS).toEqual(expect.arrayContaining(['dispatches', 'runs', 'origins', 'targets', 'counts', 'attention', 'rejections']));
    const spelled = FOLDERS.flatMap(sources).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((line, index) => (SPELLED.test(line) && !/^\s*(\*|\/\/|\/\*)/.test(line) ? [`${relative(projectRoot, file)}:${index + 1}: ${line.trim().slice(0, 120)}`] : [])),
    );
    expect(spelled).toEqual([]);
  });
});
