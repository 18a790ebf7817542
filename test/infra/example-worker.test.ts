import { build } from 'esbuild';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ESBUILD_OPTIONS, PROJECT_ROOT } from '../../infra/bundling.js';
import { ExampleLambdaWorker } from '../../infra/constructs/example-lambda-worker.js';
import { cfnLint, logicalId, synthesizeLedger, type Synthesized } from './synth.js';

/** The app with the example Lambda worker (`-c exampleLambdaWorker=true`), bundled as deployed. */

let synth: Synthesized;
let example: ExampleLambdaWorker;

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      example = new ExampleLambdaWorker(stack, 'ExampleWorker', { ledger: stack.ledger });
    },
  });
}, 120_000);
afterAll(() => synth.dispose());

describe('the example Lambda worker', () => {
  it('deploys as the lambda target example-worker, with its run-state table in KIT_RUN_TABLE, and no unacknowledged cdk-nag finding', () => {
    const worker = synth.template.toJSON().Resources[logicalId(synth.stack, example.worker.function)] as { Properties: { Environment: { Variables: Record<string, unknown> }; Runtime: string } };
    expect(worker.Properties.Environment.Variables.KIT_RUN_TABLE).toEqual({ Ref: logicalId(synth.stack, example.runs) });
    expect(worker.Properties.Runtime).toMatch(/^nodejs2[2-9]\.x$/);
    expect(synth.nagFindings).toEqual([]);
  });

  it('passes cfn-lint with no errors or warnings (W3005 aside, as for the stack itself)', () => {
    const { status, output } = cfnLint(synth.templateFile);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});

describe('a kit-based Lambda worker bundle', () => {
  /** Minified bytes of an entry built with the deployed options (ESM, the SDK bundled). */
  const bytesOf = async (options: { entryPoints: string[] } | { stdin: { contents: string; resolveDir: string; loader: 'ts' } }): Promise<number> => {
    const built = await build({ ...options, bundle: true, platform: 'node', format: 'esm', target: ESBUILD_OPTIONS.target, minify: true, mainFields: [...ESBUILD_OPTIONS.mainFields], banner: { js: ESBUILD_OPTIONS.banner }, define: { ...ESBUILD_OPTIONS.define }, write: false, outfile: 'worker.mjs', logLevel: 'silent' });
    return built.outputFiles.reduce((total, file) => total + file.contents.byteLength, 0);
  };

  it('stays within 1.2 × a bundle of only the SDK clients it uses (issue 15)', async () => {
    const worker = await bytesOf({ entryPoints: [path.join(PROJECT_ROOT, 'examples', 'lambda-worker', 'handler.ts')] });
    // The same SDK exports the kit takes, constructed as the kit constructs them, kept alive.
    const sdkOnly = await bytesOf({
      stdin: {
        resolveDir: PROJECT_ROOT,
        loader: 'ts',
        contents: [
          "import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';",
          "import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';",
          "import { defaultProvider } from '@aws-sdk/credential-provider-node';",
          "import { Hash } from '@smithy/hash-node';",
          "import { SignatureV4 } from '@smithy/signature-v4';",
          'const documents = DynamoDBDocumentClient.from(new DynamoDBClient({}));',
          "const signer = new SignatureV4({ service: 'lambda', region: 'us-east-1', credentials: defaultProvider(), sha256: Hash.bind(null, 'sha256') });",
          'export const keep = [documents, signer, GetCommand, PutCommand, ConditionalCheckFailedException];',
        ].join('\n'),
      },
    });
    expect(sdkOnly).toBeGreaterThan(100_000);
    expect(worker / sdkOnly, `${worker} B vs ${sdkOnly} B`).toBeLessThanOrEqual(1.2);
  });
});

