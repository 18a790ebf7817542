import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';

/** A ledger function's structured logger: every line carries the service and the function's name. */
export const functionLogger = (name: string): Logger => new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: name } });

/** The ledger's CloudWatch metrics (namespace `DispatchLedger`), as every function emits them. */
export const functionMetrics = (): Metrics => new Metrics({ namespace: 'DispatchLedger', serviceName: 'dispatch-ledger' });
