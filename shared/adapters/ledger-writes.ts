import { LAMBDA_FAILURE_ITEM, MESSAGE_ITEM, ORIGIN_SETTINGS_ITEM, PRINCIPAL_ITEM, STATE_ITEM, TARGET_ITEM, expiryFields } from './item-kinds.js';
import {
  DeleteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { DueEntry, LedgerWrites, PutOutcome } from '../ledger/port.js';
import type { AcceptedMessage, LambdaFailureRecord, OriginSettings, PastAttempt, Rejection, RejectionAudience } from '../dispatch/records.js';
import type { Principal } from '../principals/principals.js';
import type { TargetRegistration } from '../targets/port.js';
import { targetOf, messageItem, messageOf, lambdaFailureOf, pastAttemptItem, rejectionItem, rejectionOf, originRejectionItem, refusalItem } from './ledger-items.js';
import { LedgerTableCore } from './ledger-table.js';
import { isConditionFailure, onceOnly } from './ledger-commands.js';
import { ALLOT_ROUNDS, REGISTRATION_REV } from './ledger-table.js';



/** The whole ledger table: the intake, monitor and failures functions', the CLI's and the tests' (`LedgerStore` and `LedgerWrites`). */
export class LedgerTable extends LedgerTableCore implements LedgerWrites {
  async putAcceptedMessage(message: AcceptedMessage): Promise<PutOutcome<AcceptedMessage>> {
    return this.putOnce(onceOnly(this.table, messageItem(message, this.options.retentionSeconds)), messageOf);
  }

  async renewClaim(dispatchId: string, expectedClaimUntil: string, claimUntil: string, claimBy: string): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: MESSAGE_ITEM.key(dispatchId),
          UpdateExpression: 'SET claimUntil = :next, claimBy = :by',
          // Or already this delivery's: its renewal, the answer lost and sent again by the SDK.
          ConditionExpression: 'claimUntil = :expected OR claimBy = :by',
          ExpressionAttributeValues: { ':next': claimUntil, ':expected': expectedClaimUntil, ':by': claimBy },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async archiveAttempt(past: PastAttempt): Promise<void> {
    await this.putItem({ TableName: this.table, Item: pastAttemptItem(past, this.options.retentionSeconds) });
  }

  async putRejection(rejection: Rejection, audience: RejectionAudience = { origin: false, dispatch: false }): Promise<PutOutcome<Rejection>> {
    const outcome = await this.putOnce(onceOnly(this.table, rejectionItem(rejection, this.options.retentionSeconds)), rejectionOf);
    if (!rejection.origin || !audience.origin) return outcome;
    // The stored rejection's time (a redelivery recomputes its own): the same keys, rewritten with the
    // same content — a crash between these puts and the first is made good by the redelivery.
    const at = outcome.kind === 'exists' ? outcome.existing.at : rejection.at;
    const { messageId, reason, dispatchId, origin } = rejection;
    const puts = [originRejectionItem({ messageId, at, reason, dispatchId, origin, bodyPreview: rejection.bodyPreview, bodyBytes: rejection.bodyBytes }, this.options.retentionSeconds)];
    if (dispatchId && audience.dispatch) puts.push(refusalItem(dispatchId, origin, { messageId, at, reason }, this.options.retentionSeconds));
    await Promise.all(puts.map((Item) => this.putItem({ TableName: this.table, Item })));
    return outcome;
  }

  async deferDue(due: DueEntry, until: Date): Promise<void> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: STATE_ITEM.key(due.dispatchId),
          UpdateExpression: 'SET dueAt = :until',
          // Only the due time the monitor saw: a state written meanwhile has set its own.
          ConditionExpression: 'attribute_exists(dueShard) AND dueAt = :seen',
          ExpressionAttributeValues: { ':until': until.toISOString(), ':seen': due.dueAt },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  /**
   * Registers a target. Each write gets the next revision of its registration (conditioned on the one
   * read, so two writers are ordered); the limit lives in the slot counters' own caps (what the slot
   * write is conditioned on), written for that revision — a write that lost the race, or died before its
   * caps, never leaves them other than the registration last written (the monitor's `alignSlotCaps`).
   */
  async putTarget(target: TargetRegistration): Promise<void> {
    let rev = 0;
    for (let round = 0; ; round += 1) {
      const stored = await this.getItem(TARGET_ITEM.key(target.name), true);
      const seen = typeof stored?.[REGISTRATION_REV] === 'number' ? (stored[REGISTRATION_REV] as number) : undefined;
      rev = (seen ?? 0) + 1;
      try {
        await this.putItem({
          TableName: this.table,
          Item: { ...TARGET_ITEM.key(target.name), ...target, [REGISTRATION_REV]: rev },
          ...(seen === undefined
            ? { ConditionExpression: 'attribute_not_exists(#rev)', ExpressionAttributeNames: { '#rev': REGISTRATION_REV } }
            : { ConditionExpression: '#rev = :seen', ExpressionAttributeNames: { '#rev': REGISTRATION_REV }, ExpressionAttributeValues: { ':seen': seen } }),
        });
        break;
      } catch (error) {
        if (!isConditionFailure(error) || round >= ALLOT_ROUNDS) throw error;
      }
    }
    if (target.maxConcurrentRuns !== undefined || (await this.limitedShardCounts()).has(target.name)) await this.syncSlotCaps(target.name, target.maxConcurrentRuns, { rev });
  }

  /**
   * Takes a target's registration away (the local platform's `ledger local target remove`). Its runs in
   * flight are then looked up as unavailable, so they go `unknown`, never failed; what waits for it is
   * blocked `unknown_target` at the next admission.
   */
  async deleteTarget(name: string): Promise<void> {
    await this.db.send(new DeleteCommand({ TableName: this.table, Key: TARGET_ITEM.key(name) }));
  }

  /**
   * Puts the registration last written in force when its caps were not written for it (its writer died
   * between the two writes): a fresh read of both, and the caps written for that revision. A deploy-time
   * limit is put in force by `slotShards` instead. Called by the monitor for each limited target each tick.
   */
  async alignSlotCaps(target: string): Promise<void> {
    if (this.options.registry?.targets.has(target)) return;
    const stored = await this.getItem(TARGET_ITEM.key(target), true);
    const rev = typeof stored?.[REGISTRATION_REV] === 'number' ? (stored[REGISTRATION_REV] as number) : undefined;
    if (!stored || rev === undefined || ((await this.limitedItem()).capsRevs.get(target) ?? 0) >= rev) return;
    await this.syncSlotCaps(target, targetOf(stored).maxConcurrentRuns, { rev });
  }

  async putOriginSettings(origin: string, settings: Partial<OriginSettings>): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...ORIGIN_SETTINGS_ITEM.key(origin), origin, ...settings } });
  }

  async putLambdaFailure(failure: LambdaFailureRecord): Promise<PutOutcome<LambdaFailureRecord>> {
    const item = { ...LAMBDA_FAILURE_ITEM.key(failure.dispatchId, failure.attempt), ...failure, ...expiryFields(LAMBDA_FAILURE_ITEM, failure, this.options.retentionSeconds) };
    return this.putOnce(onceOnly(this.table, item), lambdaFailureOf);
  }

  async putPrincipal(principalId: string, principal: Principal): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...PRINCIPAL_ITEM.key(principalId), principalId, ...principal } });
  }

  /** Takes a principal's registration away (a local target's signing identity, at `ledger local target remove`). */
  async deletePrincipal(principalId: string): Promise<void> {
    await this.db.send(new DeleteCommand({ TableName: this.table, Key: PRINCIPAL_ITEM.key(principalId) }));
  }
}
