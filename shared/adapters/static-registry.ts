import * as z from 'zod/mini';
import '@dispatch-ledger/protocol/english';
import { lazy } from '../lazy.js';
import type { Principal } from '../principals/principals.js';
import { DURABLE_FUNCTION_ARN, MAX_CONCURRENT_RUNS_LIMIT, TARGET_KINDS, type TargetRegistration } from '../targets/port.js';
import { DEFAULT_ORIGIN_SETTINGS, MAX_ORIGIN_SETTINGS, type OriginSettings } from '../dispatch/records.js';
import { baseUrlProblem, type AddressPolicy } from './target-address.js';

/**
 * Principals and targets registered at deploy time (the CDK construct's `addOrigin`, `addTarget`…),
 * handed to the functions as the `LEDGER_REGISTRY` variable. They take precedence over entries
 * registered later in the table (`ledger registry`), so a deployed mapping cannot be overridden by
 * a table write.
 */
export interface StaticRegistry {
  readonly principals: ReadonlyMap<string, Principal>;
  readonly targets: ReadonlyMap<string, TargetRegistration>;
  /** Per-origin delivery settings (CONTRACT §10), by origin name. */
  readonly origins?: ReadonlyMap<string, OriginSettings>;
}

// Built on the first parse: a function without LEDGER_REGISTRY (the local platform's) never builds them.
const nonBlank = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(2048)));
// Flat shapes (role + optional name) rather than a discriminated union: the same few zod features
// as the dispatch message, so the registry adds almost nothing to the intake bundle.
const principalSchema = /* @__PURE__ */ lazy(() => z.object({ role: z.enum(['origin', 'target', 'operator']), origin: z.optional(nonBlank()), target: z.optional(nonBlank()) }));
const registrySchema = /* @__PURE__ */ lazy(() => z.object({
  principals: z.array(z.object({ id: nonBlank(), principal: principalSchema() })),
  targets: z.array(
    z.object({
      name: nonBlank(),
      kind: z.enum(TARGET_KINDS),
      baseUrl: z.optional(nonBlank()),
      secretRef: z.optional(nonBlank()),
      functionArn: z.optional(nonBlank()),
      timeoutSeconds: z.optional(z.int().check(z.minimum(1), z.maximum(900))),
      stateTable: z.optional(nonBlank()),
      stateMachineArn: z.optional(nonBlank()),
      roleId: z.optional(nonBlank()),
      maxConcurrentRuns: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_CONCURRENT_RUNS_LIMIT))),
    }),
  ),
  origins: z.optional(
    z.array(
      z.object({
        origin: nonBlank(),
        maxDeliveryAttempts: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_ORIGIN_SETTINGS.maxDeliveryAttempts))),
        resultTtlHours: z.optional(z.number().check(z.positive(), z.maximum(MAX_ORIGIN_SETTINGS.resultTtlHours))),
      }),
    ),
  ),
}));

function principalOf(id: string, entry: z.output<ReturnType<typeof principalSchema>>): Principal {
  if (entry.role === 'operator') return { role: 'operator' };
  const name = entry.role === 'origin' ? entry.origin : entry.target;
  if (!name) throw new RangeError(`LEDGER_REGISTRY: principal ${id} has role ${entry.role} but names no ${entry.role}`);
  return entry.role === 'origin' ? { role: 'origin', origin: name } : { role: 'target', target: name };
}

export const EMPTY_REGISTRY: StaticRegistry = { principals: new Map(), targets: new Map() };

/**
 * Parses `LEDGER_REGISTRY`; a malformed value fails the cold start rather than authorizing wrongly, and
 * so does a target base URL `policy` refuses (CONTRACT §8 v2: in AWS https, and never loopback,
 * link-local or metadata addresses).
 */
export function parseStaticRegistry(json: string, policy: AddressPolicy = 'public-only'): StaticRegistry {
  if (json.trim() === '') return EMPTY_REGISTRY;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new RangeError('LEDGER_REGISTRY is not JSON');
  }
  const parsed = registrySchema().safeParse(value);
  if (!parsed.success) throw new RangeError(`LEDGER_REGISTRY is malformed: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  const principals = new Map<string, Principal>();
  for (const { id, principal } of parsed.data.principals) {
    if (principals.has(id)) throw new RangeError(`LEDGER_REGISTRY names principal ${id} twice`);
    principals.set(id, principalOf(id, principal));
  }
  const targets = new Map<string, TargetRegistration>();
  for (const entry of parsed.data.targets) {
    const limit = entry.maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns: entry.maxConcurrentRuns };
    if (entry.kind === 'manual') {
      // A person works it: nothing to call, so nothing to limit (a limit here is a mistake, not a no-op).
      if (entry.baseUrl || entry.functionArn || entry.secretRef || entry.maxConcurrentRuns !== undefined) throw new RangeError(`LEDGER_REGISTRY: manual target ${entry.name} takes only a name`);
      targets.set(entry.name, { name: entry.name, kind: 'manual' });
      continue;
    }
    if (entry.kind === 'lambda') {
      if (!entry.functionArn || !entry.timeoutSeconds) throw new RangeError(`LEDGER_REGISTRY: lambda target ${entry.name} needs functionArn and timeoutSeconds`);
      targets.set(entry.name, { name: entry.name, kind: 'lambda', functionArn: entry.functionArn, timeoutSeconds: entry.timeoutSeconds, ...(entry.stateTable ? { stateTable: entry.stateTable } : {}), ...limit });
      continue;
    }
    if (entry.kind === 'durable') {
      if (!entry.functionArn || !DURABLE_FUNCTION_ARN.test(entry.functionArn)) throw new RangeError(`LEDGER_REGISTRY: durable target ${entry.name} needs functionArn, qualified by a version or an alias`);
      targets.set(entry.name, { name: entry.name, kind: 'durable', functionArn: entry.functionArn, ...limit });
      continue;
    }
    if (entry.kind === 'stepfunctions') {
      if (!entry.stateMachineArn) throw new RangeError(`LEDGER_REGISTRY: stepfunctions target ${entry.name} needs stateMachineArn`);
      targets.set(entry.name, { name: entry.name, kind: 'stepfunctions', stateMachineArn: entry.stateMachineArn, ...(entry.roleId ? { roleId: entry.roleId } : {}), ...limit });
      continue;
    }
    const problem = entry.baseUrl === undefined ? 'is missing' : baseUrlProblem(entry.baseUrl, policy);
    if (problem || entry.baseUrl === undefined) throw new RangeError(`LEDGER_REGISTRY: target ${entry.name}: baseUrl ${problem ?? 'is missing'}`);
    targets.set(entry.name, { name: entry.name, kind: 'http', baseUrl: entry.baseUrl, ...(entry.secretRef ? { secretRef: entry.secretRef } : {}), ...limit });
  }
  const origins = new Map<string, OriginSettings>();
  for (const { origin, ...settings } of parsed.data.origins ?? []) {
    if (origins.has(origin)) throw new RangeError(`LEDGER_REGISTRY names origin ${origin} twice`);
    origins.set(origin, { ...DEFAULT_ORIGIN_SETTINGS, ...settings });
  }
  return { principals, targets, origins };
}
