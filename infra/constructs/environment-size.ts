import { Annotations, Stack } from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';

/** Lambda refuses a function whose environment variables, names and values, total more than 4 KB. */
export const LAMBDA_ENVIRONMENT_BYTES = 4 * 1024;

/** A value's length once CloudFormation has filled it in: the least it can be, and what it usually is. */
interface Length {
  readonly least: number;
  readonly usual: number;
}

const exactly = (length: number): Length => ({ least: length, usual: length });
const sum = (lengths: readonly Length[]): Length => ({ least: lengths.reduce((total, length) => total + length.least, 0), usual: lengths.reduce((total, length) => total + length.usual, 0) });

/** Pseudo parameters' lengths (a region is 9 to 14 characters). */
const PSEUDO: Readonly<Record<string, Length>> = {
  'AWS::Region': { least: 9, usual: 14 },
  'AWS::AccountId': exactly(12),
  'AWS::Partition': { least: 3, usual: 3 },
  'AWS::URLSuffix': { least: 13, usual: 13 },
};

/**
 * The length of a resolved template value. A name CloudFormation makes up (a table's, a function's) is
 * usually ~60 characters (the stack's name is in it), an ARN ~100, a role's unique id 21; the least is what
 * none can be shorter than.
 */
function lengthOf(value: unknown): Length {
  if (typeof value === 'string') return exactly(Buffer.byteLength(value));
  if (typeof value === 'number' || typeof value === 'boolean') return exactly(String(value).length);
  if (typeof value !== 'object' || value === null) return exactly(0);
  const intrinsic = value as Record<string, unknown>;
  if (typeof intrinsic.Ref === 'string') return PSEUDO[intrinsic.Ref] ?? { least: 1, usual: 60 };
  const attribute = intrinsic['Fn::GetAtt'];
  if (Array.isArray(attribute)) return attribute[1] === 'RoleId' ? exactly(21) : attribute[1] === 'Arn' ? { least: 20, usual: 100 } : { least: 1, usual: 60 };
  const join = intrinsic['Fn::Join'];
  if (Array.isArray(join) && typeof join[0] === 'string' && Array.isArray(join[1])) {
    const parts = join[1] as unknown[];
    return sum([...parts.map(lengthOf), exactly(Buffer.byteLength(join[0]) * Math.max(0, parts.length - 1))]);
  }
  return { least: 1, usual: 60 };
}

/** What a function's environment variables will total, names and values, once deployed. */
export function environmentLength(fn: LedgerFunction): Length {
  // The L1 property (`variables`, camel case), as the template will hold it.
  const resolved = Stack.of(fn).resolve((fn.function.node.defaultChild as CfnFunction).environment) as { variables?: Record<string, unknown> } | undefined;
  return sum(Object.entries(resolved?.variables ?? {}).map(([name, value]) => sum([exactly(Buffer.byteLength(name)), lengthOf(value)])));
}

/**
 * Checks at synth that each ledger function's environment fits Lambda's 4 KB: most of it is the
 * deploy-time registry (`LEDGER_REGISTRY`), which grows with every target, origin and principal. One that
 * cannot fit fails the synth, naming what to do; one that will likely not fit is a warning (the ARNs and
 * names it holds are only known at deploy). Regression: the deploy failed at Lambda, minutes in.
 */
export function checkEnvironmentSizes(scope: Construct, functions: Readonly<Record<string, LedgerFunction>>, registry: () => string): string[] {
  const lengths = Object.entries(functions).map(([name, fn]) => ({ name, ...environmentLength(fn) }));
  const advice = `the deploy-time registry (${registry()}) is what grows: register more origins and principals at run time instead (grantOrigin, then \`ledger registry principal put\` and \`ledger registry origin put\`), and http or manual targets with \`ledger registry target put\``;
  const over = lengths.filter((length) => length.least > LAMBDA_ENVIRONMENT_BYTES);
  if (over.length > 0) {
    return [`the environment of the ${over.map((length) => length.name).join(', ')} function(s) is at least ${Math.max(...over.map((length) => length.least))} bytes, over Lambda's ${LAMBDA_ENVIRONMENT_BYTES}: ${advice}`];
  }
  const likely = lengths.filter((length) => length.usual > LAMBDA_ENVIRONMENT_BYTES);
  if (likely.length > 0) {
    const usual = Math.max(...likely.map((length) => length.usual));
    Annotations.of(scope).addWarningV2('@dispatch-ledger/cdk:environment-size', `the environment of the ${likely.map((length) => length.name).join(', ')} function(s) will likely be about ${usual} bytes, over Lambda's ${LAMBDA_ENVIRONMENT_BYTES}, and the deploy fail: ${advice}`);
  }
  return [];
}
