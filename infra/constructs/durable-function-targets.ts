import { Token } from 'aws-cdk-lib';
import { Grant } from 'aws-cdk-lib/aws-iam';
import { CfnFunction, Function as LambdaFunction, type IAlias, type IFunction, type IVersion } from 'aws-cdk-lib/aws-lambda';
import { DURABLE_FUNCTION_ARN } from '../../shared/targets/port.js';
import type { LedgerFunction } from './ledger-function.js';
import { applyAcknowledgements, durableExecutionsAcknowledgement, type NagAcknowledgement } from './nag.js';

/** Options of `addDurableFunctionTarget`. */
export interface LedgerDurableFunctionTargetOptions {
  /** At most this many of its durable executions started and not known to be over (CONTRACT §11), 1 to 10,000. @default unlimited */
  readonly maxConcurrentRuns?: number;
}

/**
 * The durable-execution calls the ledger makes (CONTRACT §17), granted on the function's versions
 * (`function:NAME:*`): a durable execution's ARN names the version that runs it, never an alias. Look
 * an execution up and read its newest event; find the one a submission's name already started (listed
 * by the function and its qualifier: Lambda matches a qualified request against a qualified grant
 * alone, never the unqualified function's ARN); stop it; answer its `waitForCallback` (never a
 * heartbeat: the ledger sends none).
 */
export const DURABLE_EXECUTION_ACTIONS = [
  'lambda:GetDurableExecution',
  'lambda:GetDurableExecutionHistory',
  'lambda:ListDurableExecutionsByFunction',
  'lambda:StopDurableExecution',
  'lambda:SendDurableExecutionCallbackSuccess',
  'lambda:SendDurableExecutionCallbackFailure',
] as const;

const isAlias = (fn: IFunction): fn is IAlias => 'aliasName' in fn && 'version' in fn;
// An alias's `version` is its version; a version's is its number (a token until deployed), or `$LATEST`.
const isVersion = (fn: IFunction): fn is IVersion => 'version' in fn && typeof fn.version === 'string' && 'lambda' in fn;

/**
 * The version a qualified function runs, refusing one that cannot be a target (CONTRACT §17): Lambda
 * starts a durable execution only from a qualified ARN, and an execution replays its code on every
 * resume, so `$LATEST` (directly or behind an alias) would change the code under a running execution.
 * Structural, since an imported version or alias is no instance of the classes.
 */
function versionOf(target: string, fn: IFunction): IVersion {
  const qualified = isAlias(fn) ? fn.version : isVersion(fn) ? fn : undefined;
  if (!qualified) {
    throw new Error(`target "${target}": a durable function is registered by a version or an alias (fn.currentVersion, a lambda.Alias), not the function itself: Lambda starts durable executions from a qualified ARN only (CONTRACT §17)`);
  }
  if (qualified.version === '$LATEST') throw new Error(`target "${target}": $LATEST cannot be a durable target: publish a version (and point an alias at it) so a running execution replays the code it started with (CONTRACT §17)`);
  if (!Token.isUnresolved(fn.functionArn) && !DURABLE_FUNCTION_ARN.test(fn.functionArn)) {
    throw new Error(`target "${target}": ${fn.functionArn} is not a function ARN qualified by a version or an alias (CONTRACT §17)`);
  }
  return qualified;
}

/**
 * The registry entry's part a durable function gives: its qualified ARN, after refusing what cannot be
 * a target. aws-cdk-lib (≥ 2.276, this package's peer) makes a function durable with its
 * `durableConfig` prop, rendered on its `CfnFunction`: a `lambda.Function` of this app without it is
 * refused (Lambda would run each submission as a plain invocation, with no execution to look up). An
 * imported function cannot be read, and is taken as it is.
 */
export function durableFunctionEntry(target: string, fn: IVersion | IAlias): { readonly functionArn: string } {
  const { lambda } = versionOf(target, fn);
  const resource = lambda instanceof LambdaFunction ? lambda.node.defaultChild : undefined;
  if (resource instanceof CfnFunction && resource.durableConfig === undefined) {
    throw new Error(`target "${target}": function ${lambda.node.path} has no durableConfig: it is not a durable function (CONTRACT §17)`);
  }
  return { functionArn: fn.functionArn };
}

/**
 * What the functions that call targets may do to one durable function, and nothing broader (CONTRACT
 * §17): invoke it by its qualified ARN, through its own grant method (the submission), and make the
 * durable-execution calls on its versions (`DURABLE_EXECUTION_ACTIONS`). Each of them submits, looks
 * up, stops and answers approvals, as for a state machine; the orchestrators function gets nothing:
 * no status change of a durable execution reaches it. Returns the acknowledgements of the grants on
 * the versions (the executions' names are the ledger's, at run time).
 */
export function grantDurableFunctionCalls(target: string, fn: IVersion | IAlias, callers: readonly LedgerFunction[]): NagAcknowledgement[] {
  const versions = `${versionOf(target, fn).lambda.functionArn}:*`;
  return callers.map((caller) => {
    fn.grantInvoke(caller.function);
    Grant.addToPrincipal({ grantee: caller.function, actions: [...DURABLE_EXECUTION_ACTIONS], resourceArns: [versions] });
    return durableExecutionsAcknowledgement(caller, versions);
  });
}

/** The durable function targets of a ledger (CONTRACT §17): their grants and registry entries. */
export class DurableFunctionTargets {
  /** The cdk-nag findings its grants make, each acknowledged as it was made (listed by `nagAcknowledgements`). */
  readonly acknowledgements: NagAcknowledgement[] = [];

  /** `callers`: the functions that call targets (they invoke, look up, stop and answer executions). */
  constructor(private readonly callers: readonly LedgerFunction[]) {}

  /** Refuses a function that cannot be a target, grants its calls, and returns its part of the registry entry. */
  add(target: string, fn: IVersion | IAlias): { readonly functionArn: string } {
    const entry = durableFunctionEntry(target, fn);
    const made = grantDurableFunctionCalls(target, fn, this.callers);
    applyAcknowledgements(made);
    this.acknowledgements.push(...made);
    return entry;
  }
}
