import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Rule, type EventPattern } from 'aws-cdk-lib/aws-events';
import { SqsQueue } from 'aws-cdk-lib/aws-events-targets';
import { Role } from 'aws-cdk-lib/aws-iam';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import { CfnStateMachine, StateMachine, StateMachineType, type IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { fedQueue } from './fed-queue.js';
import { redriveCommand } from './ledger-alarms.js';
import type { LedgerFunction } from './ledger-function.js';
import { applyAcknowledgements, executionsAcknowledgement, orchestratorDeadLetterAcknowledgement, type NagAcknowledgement } from './nag.js';

/** Options of `addStateMachineTarget`. */
export interface LedgerStateMachineTargetOptions {
  /** At most this many of its executions started and not known to be over (CONTRACT §11), 1 to 10,000. @default unlimited */
  readonly maxConcurrentRuns?: number;
}

/** The detail-type Step Functions puts on the default bus when an execution's status changes. */
export const EXECUTION_STATUS_CHANGE = 'Step Functions Execution Status Change';

/**
 * The pattern of the rule that feeds executions' status changes to the orchestrator queue (CONTRACT
 * §17): Step Functions' own events, for the registered state machines only. Every value is an exact
 * match (an array of allowed values), so an execution of any other state machine never reaches the ledger.
 */
export function executionStatusPattern(stateMachineArns: readonly string[]): EventPattern {
  if (stateMachineArns.length === 0) throw new RangeError('an execution status rule needs at least one state machine');
  return { source: ['aws.states'], detailType: [EXECUTION_STATUS_CHANGE], detail: { stateMachineArn: [...stateMachineArns] } };
}

/**
 * The type of a state machine when this app can read it: a `StateMachine` says it, a construct whose
 * CloudFormation resource is a `CfnStateMachine` has it there (absent: Standard, CloudFormation's default).
 * An imported state machine (`StateMachine.fromStateMachineArn`) has neither: `undefined`.
 */
function typeOf(stateMachine: IStateMachine): string | undefined {
  if (stateMachine instanceof StateMachine) return stateMachine.stateMachineType;
  const resource = stateMachine.node.defaultChild;
  if (resource instanceof CfnStateMachine) return resource.stateMachineType ?? StateMachineType.STANDARD;
  return undefined;
}

/**
 * The registry entry's part a state machine gives, after refusing one that cannot be a target: an
 * Express state machine has no name idempotency and no `DescribeExecution` (CONTRACT §17). `roleId`
 * is the unique id of the role it runs as when that is a `Role` of this app; otherwise (an imported
 * state machine or role) there is none, and the ledger refuses its approval requests.
 */
export function stateMachineEntry(target: string, stateMachine: IStateMachine): { readonly stateMachineArn: string; readonly roleId?: string } {
  if (typeOf(stateMachine) === StateMachineType.EXPRESS) {
    throw new Error(`target "${target}": an Express state machine cannot be a target (no execution name idempotency, no DescribeExecution); use a Standard one (CONTRACT §17)`);
  }
  const role = stateMachine instanceof StateMachine ? stateMachine.role : undefined;
  return { stateMachineArn: stateMachine.stateMachineArn, ...(role instanceof Role ? { roleId: role.roleId } : {}) };
}

/**
 * What the functions that call targets may do to one state machine, through its own grant methods and
 * nothing broader (CONTRACT §17): start an execution (on the state machine), describe, read the
 * history of and stop its executions (`execution:NAME:*`), and answer its task tokens (approvals).
 * The orchestrators function only looks executions up: a status change is checked before it is recorded.
 * Returns the acknowledgements of the grants on executions (their names are the ledger's, at run time).
 */
export function grantStateMachineCalls(stateMachine: IStateMachine, callers: { readonly submitters: readonly LedgerFunction[]; readonly lookup: LedgerFunction }): NagAcknowledgement[] {
  const onExecutions = (caller: LedgerFunction, ...actions: string[]): NagAcknowledgement[] =>
    stateMachine.grantExecution(caller.function, ...actions).principalStatements.flatMap((statement) => statement.resources.map((executions) => executionsAcknowledgement(caller, executions)));
  const acknowledgements = callers.submitters.flatMap((caller) => {
    stateMachine.grantStartExecution(caller.function);
    // The decisions the ledger sends (grantTaskResponse would add SendTaskHeartbeat, which it never sends).
    stateMachine.grant(caller.function, 'states:SendTaskSuccess', 'states:SendTaskFailure');
    return onExecutions(caller, 'states:DescribeExecution', 'states:GetExecutionHistory', 'states:StopExecution');
  });
  return [...acknowledgements, ...onExecutions(callers.lookup, 'states:DescribeExecution', 'states:GetExecutionHistory')];
}

export interface StateMachineTargetsProps {
  /** The function reading the orchestrator queue (`orchestrators` in the list of functions). */
  readonly orchestrators: LedgerFunction;
  /** The functions that call targets: they start, look up, stop and answer executions. */
  readonly submitters: readonly LedgerFunction[];
  /** Where the orchestrator DLQ's alarm goes: the ledger's alarm topic. */
  readonly alarmTopic: ITopic;
  /** The ledger table's name, for the redrive command the DLQ's alarm names. @default a placeholder */
  readonly ledgerTableName?: string;
}

/**
 * The state machine targets of a ledger (CONTRACT §17): their grants, registry entries and the
 * orchestrator queue with what feeds it: state machines' approval requests (sent by a
 * `.waitForTaskToken` task, `{ dispatchId, runId, taskToken }`) and Step Functions' execution status
 * changes of the registered state machines (one rule on the default bus, where Step Functions puts
 * them). The queue is made with the ledger, since the orchestrators function reads it; the rule with
 * the first state machine. The orchestrators function reads it; what it cannot take after 5 receives, and any event EventBridge
 * could not deliver, moves to a DLQ, which alarms. Both queues are SSE-encrypted with SQS-managed keys
 * (state machines' roles and EventBridge need no KMS grant) and refuse plain HTTP.
 */
export class StateMachineTargets extends Construct {
  /** The cdk-nag findings its grants and queues make, each acknowledged as it was made (listed by `nagAcknowledgements`). */
  readonly acknowledgements: NagAcknowledgement[] = [];
  private readonly props: StateMachineTargetsProps;
  private queues: { readonly queue: Queue; readonly deadLetterQueue: Queue; readonly alarm: Alarm } | undefined;
  private statusRule: Rule | undefined;

  constructor(scope: Construct, id: string, props: StateMachineTargetsProps) {
    super(scope, id);
    this.props = props;
    // With the ledger, as its function's event source is (a state machine's approval task names it before the state machine is added).
    this.queuesOf();
  }

  /** Where state machines send approval requests and where their status changes arrive. */
  get queue(): Queue {
    return this.queuesOf().queue;
  }

  /** The orchestrator queue's DLQ, once the queue exists. */
  get deadLetterQueue(): Queue | undefined {
    return this.queues?.deadLetterQueue;
  }

  /** The alarm on the DLQ, once the queue exists. */
  get deadLetterAlarm(): Alarm | undefined {
    return this.queues?.alarm;
  }

  /** The rule on the default bus, once a state machine is registered. */
  get rule(): Rule | undefined {
    return this.statusRule;
  }

  /**
   * Refuses a state machine that cannot be a target, grants its calls, lets it send approval requests
   * to the queue (its role, through the queue's own grant; an imported state machine has no role here,
   * and the ledger would refuse its requests anyway: no role id) and routes its status changes to the
   * queue. Returns its part of the registry entry.
   */
  add(target: string, stateMachine: IStateMachine): { readonly stateMachineArn: string; readonly roleId?: string } {
    const entry = stateMachineEntry(target, stateMachine);
    this.acknowledge(grantStateMachineCalls(stateMachine, { submitters: this.props.submitters, lookup: this.props.orchestrators }));
    if (stateMachine instanceof StateMachine) this.queue.grantSendMessages(stateMachine);
    if (this.statusRule) {
      // Merged into the one rule: each registered state machine's ARN joins the exact-match list.
      this.statusRule.addEventPattern({ detail: { stateMachineArn: [stateMachine.stateMachineArn] } });
    } else {
      // The default bus (no eventBus): Step Functions puts its status changes there and nowhere else.
      this.statusRule = new Rule(this, 'ExecutionStatusRule', {
        description: 'Step Functions execution status changes of the Dispatch Ledger targets, to the orchestrator queue (CONTRACT §17)',
        eventPattern: executionStatusPattern([stateMachine.stateMachineArn]),
        targets: [new SqsQueue(this.queue, { deadLetterQueue: this.queuesOf().deadLetterQueue })],
      });
    }
    return entry;
  }

  private queuesOf(): { readonly queue: Queue; readonly deadLetterQueue: Queue; readonly alarm: Alarm } {
    if (this.queues) return this.queues;
    const { queue, deadLetterQueue } = fedQueue(this, 'Queue', { name: 'orchestrators', fn: this.props.orchestrators }, 5);
    // Messages land in a DLQ without being "sent" to it: watch the visible count, and read silence as empty.
    const alarm = new Alarm(this, 'DeadLetterQueueAlarm', {
      metric: deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(1) }),
      threshold: 1,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription:
        `An approval request or an execution's status change could not be taken in: the run stays as recorded until the monitor looks it up, and an approval request is lost to the ledger. Read the orchestrators function's logs, then move the DLQ's messages back to the orchestrator queue as an operator: ${redriveCommand(this, deadLetterQueue, queue, this.props.ledgerTableName)}.`,
    });
    const action = new SnsAction(this.props.alarmTopic);
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
    this.acknowledge([orchestratorDeadLetterAcknowledgement(deadLetterQueue)]);
    this.queues = { queue, deadLetterQueue, alarm };
    return this.queues;
  }

  private acknowledge(made: readonly NagAcknowledgement[]): void {
    applyAcknowledgements(made);
    this.acknowledgements.push(...made);
  }
}
