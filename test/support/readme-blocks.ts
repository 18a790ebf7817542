import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.js';

/**
 * The README's blocks a test runs, each marked `<!-- packaging: FILE -->` on the line before its fence:
 * FILE → the block's text, as written. Fails when a block the caller needs is not there.
 */
export function readmeBlocks(...needed: string[]): Record<string, string> {
  const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8');
  const blocks: Record<string, string> = {};
  for (const match of readme.matchAll(/<!-- packaging: (\S+) -->\n```\w*\n([\s\S]*?)```/g)) {
    const [, file, text] = match;
    if (file !== undefined && text !== undefined) blocks[file] = text;
  }
  for (const file of needed) if (blocks[file] === undefined) throw new Error(`README.md has no block marked <!-- packaging: ${file} -->`);
  return blocks;
}
