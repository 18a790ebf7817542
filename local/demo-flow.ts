/**
 * `demo-flow`: the state machine `ledger local up` registers as the target `demo-sfn` (CONTRACT §17), a
 * Standard state machine the local Step Functions (moto) runs. Its input is the §8 submission body;
 * it reads only `task`:
 * - `task.seconds` (default 1): how long it works, waiting;
 * - `task.behavior`: `fail` ends it in a Fail state (error and cause below), anything else succeeds;
 * - `task.stepSeconds`: wait in steps of this many seconds until `task.seconds` have passed, so its
 *   history gains events every step. An execution sends no heartbeats: the monitor judges a run by its
 *   newest history event, so one long Wait looks stalled once it outlasts `stallAfterSeconds`, while a
 *   stepping one stays active (the ledger's "still running while its history advances" case).
 *
 * Only states moto runs (Pass, Wait, Choice, Succeed, Fail), with `SecondsPath`, Pass `Parameters` and
 * `ResultPath`, and the intrinsic `States.MathAdd` (all run by moto 5.2.1). A task given by `taskRef`
 * carries no `task`: every field is tested with `IsPresent` before it is read (a Choice on an absent
 * path fails the execution), so such a run waits the default and succeeds. Seconds are whole numbers
 * (`SecondsPath` and `States.MathAdd` take integers); any other value fails the execution with
 * `States.Runtime`, as in AWS.
 *
 * @example
 * // A dispatch to demo-sfn that works 30 s, one history step every 2 s, then succeeds:
 * // { "target": "demo-sfn", "task": { "seconds": 30, "stepSeconds": 2 }, ... }
 */

/** The state machine's name (the local platform prefixes it when it shares engines). */
export const DEMO_FLOW_NAME = 'demo-flow';

/** The role it runs as: moto checks the ARN's shape only, never the role. */
export const DEMO_FLOW_ROLE_ARN = 'arn:aws:iam::000000000000:role/dispatch-ledger-demo-flow';

/** What a `task.behavior: 'fail'` execution ends with (its DescribeExecution `error` and `cause`). */
export const DEMO_FLOW_FAILURE = { error: 'DemoFlowFailed', cause: 'the task asked to fail (behavior: fail)' } as const;

/** Where the stepping loop keeps the seconds waited so far, beside the input. */
const WAITED = '$.demoFlow.waited';

const present = (variable: string, next: string) => ({ Variable: variable, IsPresent: true, Next: next });

/** The definition (Amazon States Language), as CreateStateMachine takes it. */
export const DEMO_FLOW_DEFINITION = {
  Comment: 'dispatch-ledger demo-flow: waits task.seconds (default 1, in steps of task.stepSeconds if given), then succeeds, or fails when task.behavior is fail',
  StartAt: 'Plan',
  States: {
    Plan: { Type: 'Choice', Choices: [present('$.task.seconds', 'HowToWait')], Default: 'WaitDefault' },
    HowToWait: { Type: 'Choice', Choices: [present('$.task.stepSeconds', 'StartSteps')], Default: 'Wait' },
    WaitDefault: { Type: 'Wait', Seconds: 1, Next: 'Outcome' },
    Wait: { Type: 'Wait', SecondsPath: '$.task.seconds', Next: 'Outcome' },
    // The loop: Wait a step → add it to what was waited → another step while that is under task.seconds.
    StartSteps: { Type: 'Pass', Parameters: { waited: 0 }, ResultPath: '$.demoFlow', Next: 'Step' },
    Step: { Type: 'Wait', SecondsPath: '$.task.stepSeconds', Next: 'Count' },
    Count: { Type: 'Pass', Parameters: { 'waited.$': `States.MathAdd(${WAITED}, $.task.stepSeconds)` }, ResultPath: '$.demoFlow', Next: 'MoreSteps' },
    MoreSteps: { Type: 'Choice', Choices: [{ Variable: WAITED, NumericLessThanPath: '$.task.seconds', Next: 'Step' }], Default: 'Outcome' },
    Outcome: { Type: 'Choice', Choices: [present('$.task.behavior', 'Behavior')], Default: 'Done' },
    Behavior: { Type: 'Choice', Choices: [{ Variable: '$.task.behavior', StringEquals: 'fail', Next: 'Failed' }], Default: 'Done' },
    Failed: { Type: 'Fail', Error: DEMO_FLOW_FAILURE.error, Cause: DEMO_FLOW_FAILURE.cause },
    // The output (the run's result summary): which dispatch and attempt it completed, not the whole input.
    Done: { Type: 'Pass', Parameters: { 'dispatchId.$': '$.dispatchId', 'attempt.$': '$.attempt', outcome: 'completed' }, Next: 'Succeeded' },
    Succeeded: { Type: 'Succeed' },
  },
} as const;
