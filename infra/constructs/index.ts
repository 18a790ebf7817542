/**
 * `@dispatch-ledger/cdk`: the `DispatchLedger` construct a team adds to its own CDK app, and what its
 * props and methods name. Built from this folder by `npm run build` (scripts/build-packages.ts) into
 * the package's ESM and CommonJS files, with the functions' prebuilt bundles (docs/architecture.md "Packages").
 */
export { DispatchLedger } from './dispatch-ledger.js';
export * from './ledger-props.js';
export { LedgerFunction, ledgerFunctionCode, type LedgerFunctionProps } from './ledger-function.js';
export { LEDGER_FUNCTIONS, type LedgerFunctionName } from './function-names.js';
export { CONTRACT_METRICS, FLOW_GAUGES, METRIC_NAMESPACE, acrossTargets, type ContractMetric, type FlowGauge } from './ledger-alarms.js';
export { DispatchIntake } from './dispatch-intake.js';
export { EventPublisher } from './event-publisher.js';
export { LambdaFailureIntake } from './lambda-failure-intake.js';
export { LedgerAlarms } from './ledger-alarms.js';
export { LedgerApi } from './ledger-api.js';
export { LedgerStorage } from './ledger-storage.js';
export { ObjectRetention } from './object-retention.js';
export { RunMonitor } from './run-monitor.js';
export { EXECUTION_STATUS_CHANGE, StateMachineTargets, executionStatusPattern, type LedgerStateMachineTargetOptions, type StateMachineTargetsProps } from './state-machine-targets.js';
export { DURABLE_EXECUTION_ACTIONS, DurableFunctionTargets, type LedgerDurableFunctionTargetOptions } from './durable-function-targets.js';
export { nagAcknowledgements, type NagAcknowledgement, type NagSubject } from './nag.js';
/** `-c events=attention` or a comma-separated list of detail-types, as `DispatchLedgerProps.events`. */
export { profileFromEnv as eventsProfileFrom, type EventsProfile } from '../../shared/events/profile.js';
