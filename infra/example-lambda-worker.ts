import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { Code } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { LedgerFunction, type DispatchLedger } from '@dispatch-ledger/cdk';
import { EXAMPLE_WORKER_DIST } from './bundling.js';

/** The example Lambda worker (examples/lambda-worker), registered as the lambda target `example-worker`. */
export class ExampleLambdaWorker extends Construct {
  readonly worker: LedgerFunction;
  readonly runs: Table;

  constructor(scope: Construct, id: string, props: { readonly ledger: DispatchLedger; readonly removalPolicy?: RemovalPolicy }) {
    super(scope, id);
    const timeout = Duration.minutes(2);
    this.worker = new LedgerFunction(this, 'Worker', {
      // Built with the ledger functions by `npm run build` (infra/bundling.ts).
      name: { code: exampleWorkerCode() },
      timeout,
      memorySize: 256,
      environment: {},
      ...(props.removalPolicy ? { removalPolicy: props.removalPolicy } : {}),
    });
    this.runs = props.ledger.addLambdaTarget('example-worker', this.worker.function, { timeout });
    this.worker.function.addEnvironment('KIT_RUN_TABLE', this.runs.tableName);
    Validations.of(this.worker.function).acknowledge(
      { id: 'Serverless-LambdaDLQ', reason: "Invoked asynchronously by the ledger with an on-failure destination (the ledger's failures queue), which Lambda prefers to a DLQ and the ledger reads." },
      { id: 'Serverless-LambdaTracing', reason: 'Every run is traceable through the ledger\'s own receipts and the structured logs; X-Ray would add a per-trace charge to every run.' },
    );
  }
}

function exampleWorkerCode(): Code {
  if (!existsSync(path.join(EXAMPLE_WORKER_DIST, 'index.mjs'))) throw new Error(`the example worker has no bundle at ${EXAMPLE_WORKER_DIST}: run npm run build`);
  return Code.fromAsset(EXAMPLE_WORKER_DIST);
}
