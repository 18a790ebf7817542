import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LedgerFunctionName } from './function-names.js';

/**
 * Where the prebuilt function bundles are, relative to this module: the package build defines it for
 * `dist/esm/index.js` and `dist/cjs/index.cjs` (both beside `dist/functions/`); run from the
 * repository's sources, this file reads the package's build output. See docs/architecture.md "Packages".
 */
declare const DISPATCH_LEDGER_FUNCTIONS_DIR: string | undefined;

/** `<functions>/<name>/index.mjs`, as `npm run build` made it; a clear error when it has not run. */
export function ledgerFunctionCode(name: LedgerFunctionName): Code {
  const relative = typeof DISPATCH_LEDGER_FUNCTIONS_DIR === 'string' ? DISPATCH_LEDGER_FUNCTIONS_DIR : '../../packages/cdk/dist/functions/';
  const dir = path.join(fileURLToPath(new URL(relative, import.meta.url)), name);
  if (!existsSync(path.join(dir, 'index.mjs'))) {
    throw new Error(`the ledger function "${name}" has no prebuilt bundle at ${dir}: in the repository, run npm run build`);
  }
  return Code.fromAsset(dir);
}

export interface LedgerFunctionProps {
  /**
   * A ledger function (its bundle is prebuilt: `dist/functions/<name>/index.mjs`), or any other function's
   * code as `{ code }` whose module exports `handler` from `index` (the example worker).
   */
  readonly name: LedgerFunctionName | { readonly code: Code };
  /** @default 512 MB */
  readonly memorySize?: number;
  readonly timeout: Duration;
  readonly environment: Readonly<Record<string, string>>;
  /** @default one month */
  readonly logRetention?: RetentionDays;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** Node.js 22 or newer. @default Runtime.NODEJS_24_X */
  readonly runtime?: Runtime;
  /**
   * The function's physical name, for a function others must name before it exists (a reference to it
   * would close a dependency cycle). @default a name CloudFormation generates
   */
  readonly functionName?: string;
}

/**
 * One ledger function: its prebuilt bundle (no esbuild, no Docker, no sources at synth),
 * arm64 on Node.js 24 (22 also works), its own log group with a retention, Powertools configured by
 * environment, and its own role that may write to that log group and nothing else until granted.
 */
export class LedgerFunction extends Construct {
  readonly function: LambdaFunction;
  readonly timeout: Duration;

  constructor(scope: Construct, id: string, props: LedgerFunctionProps) {
    super(scope, id);
    this.timeout = props.timeout;
    const logGroup = new LogGroup(this, 'Logs', {
      retention: props.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
    // Not AWSLambdaBasicExecutionRole: that policy may create and write any log group in the account.
    const role = new Role(this, 'Role', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
    logGroup.grantWrite(role);
    const runtime = props.runtime ?? Runtime.NODEJS_24_X;
    const major = Number(/^nodejs(\d+)\.x$/.exec(runtime.name)?.[1] ?? 0);
    if (major < 22) throw new RangeError(`the ledger functions need Node.js 22 or newer, got ${runtime.name}`);
    this.function = new LambdaFunction(this, 'Function', {
      role,
      ...(props.functionName === undefined ? {} : { functionName: props.functionName }),
      code: typeof props.name === 'string' ? ledgerFunctionCode(props.name) : props.name.code,
      handler: 'index.handler',
      runtime,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout,
      logGroup,
      environment: {
        POWERTOOLS_SERVICE_NAME: 'dispatch-ledger',
        POWERTOOLS_METRICS_NAMESPACE: 'DispatchLedger',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        ...props.environment,
      },
    });
  }
}

