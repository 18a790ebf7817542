import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { synthesizeLedger, type Synthesized } from './synth.js';

/**
 * Upgrades (CONTRACT §16): a release that renames the logical id of a stateful resource makes
 * CloudFormation create a new one and retain, or delete, the old — the ledger's table, its buckets, its
 * queues (with the messages in them), its bus, its alarms' topic. `stateful-resources.json` is the stack
 * as released on 2026-12-05 (before the construct moved into a package): each stateful resource's
 * logical id, type and deletion policies. The synthesized stack must hold every one of them unchanged;
 * a new stateful resource is added to the file by hand, as a decision.
 */
const SNAPSHOT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'stateful-resources.json');

/** Types whose replacement loses data or what points at it. */
const STATEFUL = new Set([
  'AWS::DynamoDB::Table',
  'AWS::DynamoDB::GlobalTable',
  'AWS::S3::Bucket',
  'AWS::SQS::Queue',
  'AWS::Events::EventBus',
  'AWS::Events::Archive',
  'AWS::SNS::Topic',
  'AWS::KMS::Key',
  'AWS::Logs::LogGroup',
]);

interface Stateful {
  readonly type: string;
  readonly deletionPolicy: string | null;
  readonly updateReplacePolicy: string | null;
}

function statefulResources(template: Record<string, unknown>): Record<string, Stateful> {
  const resources = (template['Resources'] ?? {}) as Record<string, { Type: string; DeletionPolicy?: string; UpdateReplacePolicy?: string }>;
  return Object.fromEntries(
    Object.entries(resources)
      .filter(([, resource]) => STATEFUL.has(resource.Type))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, resource]) => [id, { type: resource.Type, deletionPolicy: resource.DeletionPolicy ?? null, updateReplacePolicy: resource.UpdateReplacePolicy ?? null }]),
  );
}

let synthesized: Synthesized;
beforeAll(() => {
  synthesized = synthesizeLedger();
});
afterAll(() => synthesized?.dispose());

describe('upgrades keep every stateful resource', () => {
  it('holds each stateful resource of the released stack under the same logical id, type and retain policies, and no new one unrecorded', () => {
    const released = JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Record<string, Stateful>;
    const now = statefulResources(synthesized.template.toJSON());
    const changed = Object.entries(released).filter(([id, resource]) => JSON.stringify(now[id]) !== JSON.stringify(resource)).map(([id, resource]) => ({ id, released: resource, now: now[id] ?? 'gone' }));
    expect(changed, 'a stateful resource renamed, removed or with other policies: CloudFormation would replace it').toEqual([]);
    const added = Object.keys(now).filter((id) => !(id in released));
    expect(added, `new stateful resources: add them to ${path.basename(SNAPSHOT)} once their ids are final`).toEqual([]);
    // The table and the buckets (the ledger's records, evidence and parked events) outlive the stack by default.
    const holders = Object.values(now).filter((resource) => resource.type === 'AWS::DynamoDB::Table' || resource.type === 'AWS::S3::Bucket');
    expect(holders.map((resource) => resource.type).sort()).toEqual(['AWS::DynamoDB::Table', 'AWS::S3::Bucket', 'AWS::S3::Bucket']);
    for (const resource of holders) expect(resource).toMatchObject({ deletionPolicy: 'Retain', updateReplacePolicy: 'Retain' });
  });
});
