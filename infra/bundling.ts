import { build, type BuildOptions, type Metafile } from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { LEDGER_FUNCTIONS, type LedgerFunctionName } from './constructs/function-names.js';

export { LEDGER_FUNCTIONS, type LedgerFunctionName };

/** The repository root: the functions' entries and the build's relative paths are resolved from here. */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Where `npm run build` puts the functions' bundles: shipped in `@dispatch-ledger/cdk` (docs/architecture.md "Packages"). */
export const FUNCTIONS_DIST = path.join(PROJECT_ROOT, 'packages', 'cdk', 'dist', 'functions');
/** The example Lambda worker's bundle (the repository's own stack deploys it; no package ships it). */
export const EXAMPLE_WORKER_DIST = path.join(PROJECT_ROOT, 'examples', 'lambda-worker', 'dist');

/**
 * The table, the evidence bucket, target secrets and lambda targets: what intake, the API and the monitor talk to —
 * the clients and the commands and errors the adapters send and catch (`shared/adapters/*`).
 */
const LEDGER_TABLE_CLIENTS = {
  '@aws-sdk/client-dynamodb': ['DynamoDBClient', 'ConditionalCheckFailedException', 'TransactionCanceledException'],
  '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'GetCommand', 'PutCommand', 'UpdateCommand', 'QueryCommand', 'BatchGetCommand', 'TransactWriteCommand'],
  '@aws-sdk/util-dynamodb': ['unmarshall'],
  '@aws-sdk/client-s3': ['S3Client', 'GetObjectCommand', 'PutObjectCommand', 'NoSuchKey'],
  '@aws-sdk/client-secrets-manager': ['SecretsManagerClient', 'GetSecretValueCommand'],
  // lambda targets (CONTRACT §12): invoked asynchronously; durable targets (CONTRACT §17): started the
  // same way, then looked up, found by name, stopped, their callbacks answered.
  '@aws-sdk/client-lambda': [
    'LambdaClient', 'InvokeCommand',
    'GetDurableExecutionCommand', 'GetDurableExecutionHistoryCommand', 'ListDurableExecutionsByFunctionCommand',
    'StopDurableExecutionCommand', 'SendDurableExecutionCallbackSuccessCommand', 'SendDurableExecutionCallbackFailureCommand',
  ],
  // stepfunctions targets (CONTRACT §17): started, looked up, stopped, their approvals answered.
  '@aws-sdk/client-sfn': ['SFNClient', 'StartExecutionCommand', 'DescribeExecutionCommand', 'GetExecutionHistoryCommand', 'StopExecutionCommand', 'SendTaskSuccessCommand', 'SendTaskFailureCommand'],
} as const;

export const handlerEntry = (name: LedgerFunctionName): string => path.join(PROJECT_ROOT, 'functions', name, 'handler.ts');

/**
 * What each function takes from the AWS SDK (module → exports: clients, commands, errors): the
 * baseline its bundle is measured against (`npm run bundle:report`). A function that starts using another client must say so here.
 */
export const SDK_IMPORTS_OF: Readonly<Record<LedgerFunctionName, Readonly<Record<string, readonly string[]>>>> = {
  // Its puts go out on a low-level client too (shared/adapters/hot-path-table.ts).
  intake: {
    ...LEDGER_TABLE_CLIENTS,
    '@aws-sdk/client-dynamodb': [...LEDGER_TABLE_CLIENTS['@aws-sdk/client-dynamodb'], 'PutItemCommand'],
    '@aws-sdk/util-dynamodb': ['unmarshall', 'marshall'],
  },
  api: LEDGER_TABLE_CLIENTS,
  monitor: LEDGER_TABLE_CLIENTS,
  // Puts the events on the bus, and adds each batch's counts to a counter item (GET /counts).
  publisher: {
    '@aws-sdk/client-eventbridge': ['EventBridgeClient', 'PutEventsCommand'],
    '@aws-sdk/client-dynamodb': ['DynamoDBClient'],
    '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'UpdateCommand'],
    '@aws-sdk/util-dynamodb': ['unmarshall'],
  },
  // Decodes the TTL REMOVE records' old images and deletes the expired record's objects.
  // Lambda's on-failure records of lambda targets: reads and writes the ledger table by key, and nudges
  // the monitor (an async invoke) when the failure it records gives a slot back (CONTRACT §11).
  failures: {
    '@aws-sdk/client-dynamodb': ['DynamoDBClient', 'ConditionalCheckFailedException', 'TransactionCanceledException'],
    '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'GetCommand', 'PutCommand', 'UpdateCommand', 'QueryCommand', 'BatchGetCommand', 'TransactWriteCommand'],
    '@aws-sdk/util-dynamodb': ['unmarshall'],
    '@aws-sdk/client-lambda': ['LambdaClient', 'InvokeCommand'],
  },
  // The orchestrator queue (CONTRACT §17): reads and writes the table by key, looks a state machine's
  // execution up before it records an end, keeps a large output in the bucket, nudges the monitor.
  orchestrators: {
    '@aws-sdk/client-dynamodb': ['DynamoDBClient', 'ConditionalCheckFailedException', 'TransactionCanceledException'],
    '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'GetCommand', 'PutCommand', 'UpdateCommand', 'QueryCommand', 'BatchGetCommand', 'TransactWriteCommand'],
    '@aws-sdk/util-dynamodb': ['unmarshall'],
    '@aws-sdk/client-s3': ['S3Client', 'GetObjectCommand', 'PutObjectCommand', 'NoSuchKey'],
    '@aws-sdk/client-sfn': ['SFNClient', 'DescribeExecutionCommand', 'GetExecutionHistoryCommand'],
    '@aws-sdk/client-lambda': ['LambdaClient', 'InvokeCommand'],
  },
  retention: {
    '@aws-sdk/client-s3': ['S3Client', 'ListObjectsV2Command', 'DeleteObjectsCommand'],
    '@aws-sdk/client-dynamodb': ['DynamoDBClient', 'ConditionalCheckFailedException'],
    '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'GetCommand', 'PutCommand'],
    '@aws-sdk/util-dynamodb': ['unmarshall'],
  },
};

/**
 * The example Lambda worker built on the worker kit (issue 15: a kit-based worker within 1.2 × an
 * SDK-only bundle of the same clients), and the SDK exports the kit takes.
 */
export const KIT_WORKER = {
  entry: path.join(PROJECT_ROOT, 'examples', 'lambda-worker', 'handler.ts'),
  budget: 1.2,
  sdkImports: {
    '@aws-sdk/client-dynamodb': ['DynamoDBClient', 'ConditionalCheckFailedException'],
    '@aws-sdk/lib-dynamodb': ['DynamoDBDocumentClient', 'GetCommand', 'PutCommand'],
    '@aws-sdk/credential-provider-node': ['defaultProvider'],
    '@smithy/hash-node': ['Hash'],
    '@smithy/signature-v4': ['SignatureV4'],
  },
} as const;

/**
 * One set of esbuild options for the deployed bundles and for the bundle report, so the report
 * measures what Lambda loads. ESM (top-level await-free, tree-shaken), minified, the AWS SDK bundled
 * at the pinned versions rather than taken from the runtime, and a `require` for the few CommonJS
 * dependencies that ask for Node built-ins.
 */
export const ESBUILD_OPTIONS = {
  target: 'node22',
  minify: true,
  sourceMap: false,
  mainFields: ['module', 'main'],
  // Workspace packages (packages/protocol) are bundled from their TypeScript sources (the `@dispatch-ledger/source`
  // export condition); `module` is esbuild's own default, which naming any condition would drop.
  conditions: ['@dispatch-ledger/source', 'module'],
  banner: "import { createRequire as __ledgerCreateRequire } from 'node:module'; const require = __ledgerCreateRequire(import.meta.url);",
  // shared/faults.ts is compiled out of every deployed bundle: no switch, message or variable can turn it on.
  define: { DISPATCH_LEDGER_DEPLOYED_BUNDLE: 'true' },
} as const;

/**
 * ESBUILD_OPTIONS in esbuild's JS API: one ESM file per function, nothing external (the SDK is bundled
 * at the pinned versions rather than taken from the runtime), paths relative to the repository so the
 * output is the same wherever the repository is.
 */
export const functionBuildOptions = (): BuildOptions => ({
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: ESBUILD_OPTIONS.target,
  minify: ESBUILD_OPTIONS.minify,
  sourcemap: ESBUILD_OPTIONS.sourceMap,
  mainFields: [...ESBUILD_OPTIONS.mainFields],
  conditions: [...ESBUILD_OPTIONS.conditions],
  banner: { js: ESBUILD_OPTIONS.banner },
  define: { ...ESBUILD_OPTIONS.define },
  absWorkingDir: PROJECT_ROOT,
  write: true,
  logLevel: 'warning',
});

/**
 * Builds every ledger function to `<outDir>/<name>/index.mjs` (Lambda's handler `index.handler`) and
 * returns each build's metafile. Deterministic: the same sources and lock file give the same bytes
 * (the cdk package's test rebuilds and compares with what it ships).
 */
export async function buildFunctionBundles(outDir: string = FUNCTIONS_DIST): Promise<Record<LedgerFunctionName, Metafile>> {
  const built = await Promise.all(
    LEDGER_FUNCTIONS.map(async (name) => {
      const result = await build({ ...functionBuildOptions(), entryPoints: [handlerEntry(name)], outfile: path.join(outDir, name, 'index.mjs'), metafile: true });
      return [name, result.metafile] as const;
    }),
  );
  return Object.fromEntries(built) as Record<LedgerFunctionName, Metafile>;
}

/** The example Lambda worker (examples/lambda-worker/handler.ts) to `<outDir>/index.mjs`, as the functions are built. */
export async function buildExampleWorker(outDir: string = EXAMPLE_WORKER_DIST): Promise<void> {
  await build({ ...functionBuildOptions(), entryPoints: [KIT_WORKER.entry], outfile: path.join(outDir, 'index.mjs') });
}
