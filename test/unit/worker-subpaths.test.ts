import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../local/paths.js';

/** The packages every module of a bundle of `source` comes from. */
async function packagesBundledBy(source: string): Promise<Set<string>> {
  const result = await build({
    stdin: { contents: source, resolveDir: projectRoot, loader: 'ts' },
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    conditions: ['@dispatch-ledger/source'],
    logLevel: 'silent',
  });
  const names = Object.keys(result.metafile.inputs).flatMap((input) => {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
    return match?.[1] ? [match[1]] : [];
  });
  return new Set(names);
}

/**
 * CONTRACT §16: `@dispatch-ledger/worker/lambda` is a subpath of its own so that an HTTP worker pulls no
 * DynamoDB SDK (its run state is a file or memory); only the Lambda form keeps run state in DynamoDB.
 */
describe('@dispatch-ledger/worker subpaths', () => {
  it('an HTTP worker bundles no DynamoDB SDK; a Lambda worker does', async () => {
    const http = await packagesBundledBy("import { createWorker } from '@dispatch-ledger/worker'; export const worker = createWorker({ name: 'w', run: async () => ({}) });");
    const lambda = await packagesBundledBy("import { createLambdaWorker } from '@dispatch-ledger/worker/lambda'; export const handler = createLambdaWorker({ name: 'w', run: async () => ({}) });");
    expect([...http].filter((name) => name.includes('dynamodb'))).toEqual([]);
    expect(lambda.has('@aws-sdk/client-dynamodb')).toBe(true);
  }, 60_000);
});
