import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import path from 'node:path';
import { PROJECT_ROOT } from '../bundling.js';
import type { DispatchLedger } from './dispatch-ledger.js';
import { LedgerFunction } from './ledger-function.js';

/** The example Lambda worker (examples/lambda-worker), registered as the lambda target `example-worker`. */
export class ExampleLambdaWorker extends Construct {
  readonly worker: LedgerFunction;
  readonly runs: Table;

  constructor(scope: Construct, id: string, props: { readonly ledger: DispatchLedger; readonly removalPolicy?: RemovalPolicy }) {
    super(scope, id);
    const timeout = Duration.minutes(2);
    this.worker = new LedgerFunction(this, 'Worker', {
      name: { entry: path.join(PROJECT_ROOT, 'examples', 'lambda-worker', 'handler.ts') },
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
