import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import path from 'node:path';
import { ESBUILD_OPTIONS, handlerEntry, PROJECT_ROOT, type LedgerFunctionName } from '../bundling.js';

export interface LedgerFunctionProps {
  /** A ledger function (`functions/<name>/handler.ts`), or any other handler file given as `{ entry }` (the example worker). */
  readonly name: LedgerFunctionName | { readonly entry: string };
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
 * One ledger function: `functions/<name>/handler.ts` bundled by the local esbuild (never Docker),
 * arm64 on Node.js 24 (22 also works), its own log group with a retention, Powertools configured by
 * environment, and its own role that may write to that log group and nothing else until granted.
 */
export class LedgerFunction extends Construct {
  readonly function: NodejsFunction;
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
    this.function = new NodejsFunction(this, 'Function', {
      role,
      ...(props.functionName === undefined ? {} : { functionName: props.functionName }),
      entry: typeof props.name === 'string' ? handlerEntry(props.name) : props.name.entry,
      handler: 'handler',
      runtime,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout,
      logGroup,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      environment: {
        POWERTOOLS_SERVICE_NAME: 'dispatch-ledger',
        POWERTOOLS_METRICS_NAMESPACE: 'DispatchLedger',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: ESBUILD_OPTIONS.target,
        minify: ESBUILD_OPTIONS.minify,
        sourceMap: ESBUILD_OPTIONS.sourceMap,
        mainFields: [...ESBUILD_OPTIONS.mainFields],
        banner: ESBUILD_OPTIONS.banner,
        define: { ...ESBUILD_OPTIONS.define },
        esbuildArgs: { '--conditions': ESBUILD_OPTIONS.conditions.join(',') },
        // Bundle the SDK at the versions the tests ran, rather than whatever the runtime ships.
        externalModules: [],
        forceDockerBundling: false,
      },
    });
  }
}

