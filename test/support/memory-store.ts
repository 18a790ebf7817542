import type { OperatorReceipt } from '../../shared/dispatch/receipts.js';
import type { ManualAttestation } from '../../shared/dispatch/manual.js';
import { stateOnly, type ChangeKind, type DispatchState, type NextState, type ResultRecord } from '../../shared/dispatch/state.js';
import { ATTENTION_KINDS, attentionKind, type AttentionKind } from '../../shared/dispatch/attention.js';
import { type CommitOutcome, type StoredState, type DueEntry, type DueIndex, type InboxRange, type InboxStore, type LedgerFeeds, type LedgerStore, type Page, type PutOutcome, type SlotCapsWrite } from '../../shared/ledger/port.js';
import { DEFAULT_ORIGIN_SETTINGS, type AcceptedMessage, type EvidenceCheck, type EvidenceMark, type EvidenceUpload, type LateEvent, type LambdaFailureRecord, type ApprovalTokenRecord, type OriginRejection, type OriginSettings, type PastAttempt, type Refusal, type Rejection, type RejectionAudience, type ResultBody } from '../../shared/dispatch/records.js';
import { writeCondition } from '../../shared/ledger/repository.js';
import { DUE_SHARD_KEYS, dueShardOf, INBOX_RANGE, inboxSortKey } from '../../shared/adapters/ledger-keys.js';
import type { Principal, PrincipalRegistry } from '../../shared/principals/principals.js';
import type { TargetRegistration } from '../../shared/targets/port.js';
import { allotSlotCaps, nextAdmission, slotLimit, wantsAllotment, type SlotShard, type WaitingEntry } from '../../shared/dispatch/slots.js';
import { DEFAULT_PRIORITY } from '../../shared/dispatch/state.js';
import { countDelta, countsOf, sumDeltas, type Counts } from '../../shared/dispatch/counts.js';
import { matchesFilter, type DispatchFilter } from '../../shared/dispatch/dispatch-filter.js';

type MutableShard = { -readonly [K in keyof SlotShard]: SlotShard[K] };

/** An in-memory fake of the ledger's store, for pure use-case and route tests. Same outcomes as the table. */
export class MemoryStore implements LedgerStore, DueIndex, LedgerFeeds, InboxStore, PrincipalRegistry {
  readonly messages = new Map<string, AcceptedMessage>();
  /** The states as stored (the state alone); a test may put one in directly (version 1 unless `written` says otherwise). */
  readonly states = new Map<string, DispatchState>();
  /** What each state's last write put beside it: its version and what it changed. */
  readonly written = new Map<string, { readonly version: number; readonly changes: readonly ChangeKind[] }>();
  readonly rejections = new Map<string, Rejection>();
  readonly targets = new Map<string, TargetRegistration>();
  readonly principals = new Map<string, Principal>();

  async putAcceptedMessage(message: AcceptedMessage): Promise<PutOutcome<AcceptedMessage>> {
    const existing = this.messages.get(message.dispatchId);
    if (existing) return { kind: 'exists', existing };
    this.messages.set(message.dispatchId, message);
    return { kind: 'written' };
  }
  async getAcceptedMessage(dispatchId: string) {
    return this.messages.get(dispatchId);
  }
  async renewClaim(dispatchId: string, expectedClaimUntil: string, claimUntil: string, claimBy: string) {
    const existing = this.messages.get(dispatchId);
    if (!existing || (existing.claimUntil !== expectedClaimUntil && existing.claimBy !== claimBy)) return false;
    this.messages.set(dispatchId, { ...existing, claimUntil, claimBy });
    return true;
  }
  /** As the table reads it: the state alone, whatever a test put in (a transition's output carries what it changed). */
  async getState(dispatchId: string): Promise<DispatchState | undefined> {
    const state = this.states.get(dispatchId);
    return state && stateOnly(state);
  }
  async getStored(dispatchId: string): Promise<StoredState | undefined> {
    const state = await this.getState(dispatchId);
    return state && { state, version: this.versionOf(dispatchId) };
  }
  versionOf(dispatchId: string): number {
    return this.written.get(dispatchId)?.version ?? 1;
  }
  private put(from: StoredState, next: NextState): void {
    this.states.set(next.dispatchId, stateOnly(next));
    this.written.set(next.dispatchId, { version: from.version + 1, changes: next.changes });
  }
  /** The table's semantics: the state machine's condition (writeCondition), checked against what is stored. */
  async commit(from: StoredState, next: NextState, ended?: PastAttempt): Promise<CommitOutcome> {
    const condition = writeCondition(from, next);
    const existing = this.states.get(next.dispatchId);
    if (condition.create ? existing !== undefined : !existing || this.versionOf(next.dispatchId) !== condition.version || existing.phase !== condition.phase) {
      return { kind: 'conflict', existing: condition.create ? existing : undefined };
    }
    if (!this.applySlots(from.state, next)) return { kind: 'slot_full' };
    this.put(from, next);
    if (ended) this.pastAttempts.set(`${ended.dispatchId}#${ended.attempt}#${ended.stateVersion}`, ended);
    return { kind: 'committed' };
  }
  /** As the table's inbox index answers (its sort-key layout, `inboxSortKey`), the dispatch id in place of the id's hash. */
  async *inboxEntries(origin: string, options: InboxRange): AsyncIterable<{ readonly dispatchId: string; readonly at: string }> {
    const inRange = (at: string): boolean => {
      if (options.range === 'claimable') return at < INBOX_RANGE.claimableBelow(options.now);
      if (options.range === 'claimed') return at > (options.after && options.after > INBOX_RANGE.claimedAbove ? options.after : INBOX_RANGE.claimedAbove);
      return at < INBOX_RANGE.pendingBelow && (!options.after || at > options.after);
    };
    const live = [...this.states.values()]
      .filter((state) => state.origin === origin && (state.result?.state === 'pending' || state.result?.state === 'claimed') && (options.range !== 'claimable' || !options.injectOnly || state.resultDelivery === 'inject'))
      .map((state) => ({ dispatchId: state.dispatchId, at: inboxSortKey(state.result as ResultRecord, state.dispatchId) }))
      .filter((entry) => inRange(entry.at))
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
    yield* live;
  }
  async commitAll(writes: ReadonlyArray<{ readonly from: StoredState; readonly next: NextState }>): Promise<CommitOutcome> {
    for (const { from, next } of writes) {
      writeCondition(from, next);
      if (!this.states.has(next.dispatchId) || this.versionOf(next.dispatchId) !== from.version) return { kind: 'conflict' };
    }
    for (const { from, next } of writes) this.put(from, next);
    return { kind: 'committed' };
  }
  readonly pastAttempts = new Map<string, PastAttempt>();
  async archiveAttempt(past: PastAttempt): Promise<void> {
    this.pastAttempts.set(`${past.dispatchId}#${past.attempt}#${past.stateVersion}`, past);
  }
  async listPastAttempts(dispatchId: string): Promise<PastAttempt[]> {
    return [...this.pastAttempts.values()].filter((past) => past.dispatchId === dispatchId).sort((a, b) => a.attempt - b.attempt || a.stateVersion - b.stateVersion);
  }
  readonly marks = new Map<string, EvidenceMark>();
  async putEvidenceMark(mark: EvidenceMark): Promise<void> {
    this.marks.set(`${mark.dispatchId}#${mark.attempt}#${mark.ref}`, mark);
  }
  async listEvidenceMarks(dispatchId: string, attempt: number): Promise<EvidenceMark[]> {
    return [...this.marks.values()].filter((mark) => mark.dispatchId === dispatchId && mark.attempt === attempt);
  }
  /** By `dispatchId#attempt#ref`: the latest upload of each ref. */
  readonly uploads = new Map<string, EvidenceUpload>();
  async putEvidenceUpload(upload: EvidenceUpload): Promise<void> {
    this.uploads.set(`${upload.dispatchId}#${upload.attempt}#${upload.ref}`, upload);
  }
  async listEvidenceUploads(dispatchId: string, attempt: number): Promise<EvidenceUpload[]> {
    return [...this.uploads.values()].filter((upload) => upload.dispatchId === dispatchId && upload.attempt === attempt);
  }
  readonly checks = new Map<string, EvidenceCheck>();
  async putEvidenceCheck(check: EvidenceCheck): Promise<PutOutcome<EvidenceCheck>> {
    const key = `${check.dispatchId}#${check.attempt}`;
    const existing = this.checks.get(key);
    if (existing) return { kind: 'exists', existing };
    this.checks.set(key, check);
    return { kind: 'written' };
  }
  async getEvidenceCheck(dispatchId: string, attempt: number) {
    return this.checks.get(`${dispatchId}#${attempt}`);
  }
  async getEvidenceBasis(dispatchId: string, attempt: number) {
    return { message: await this.getAcceptedMessage(dispatchId), check: await this.getEvidenceCheck(dispatchId, attempt), marks: await this.listEvidenceMarks(dispatchId, attempt) };
  }
  async getStateWithUploads(dispatchId: string) {
    const stored = await this.getStored(dispatchId);
    return { stored, uploads: stored ? await this.listEvidenceUploads(dispatchId, stored.state.attempt) : [] };
  }
  /** Always current here: memory has no replicas. */
  async peekState(dispatchId: string) {
    return this.getState(dispatchId);
  }
  /** By `dispatchId#receiptId`, in the order written. */
  readonly operatorReceipts = new Map<string, OperatorReceipt>();
  async putOperatorReceipt(receipt: OperatorReceipt): Promise<PutOutcome<OperatorReceipt>> {
    const key = `${receipt.dispatchId}#${receipt.receiptId}`;
    const existing = this.operatorReceipts.get(key);
    if (existing) return { kind: 'exists', existing };
    this.operatorReceipts.set(key, receipt);
    return { kind: 'written' };
  }
  async listOperatorReceipts(dispatchId: string): Promise<OperatorReceipt[]> {
    return [...this.operatorReceipts.values()].filter((receipt) => receipt.dispatchId === dispatchId);
  }
  /** By `dispatchId#attestationId`, in the order written. */
  readonly manualAttestations = new Map<string, ManualAttestation>();
  async putManualAttestation(attestation: ManualAttestation): Promise<PutOutcome<ManualAttestation>> {
    const key = `${attestation.dispatchId}#${attestation.attestationId}`;
    const existing = this.manualAttestations.get(key);
    if (existing) return { kind: 'exists', existing };
    this.manualAttestations.set(key, attestation);
    return { kind: 'written' };
  }
  async listManualAttestations(dispatchId: string): Promise<ManualAttestation[]> {
    return [...this.manualAttestations.values()].filter((attestation) => attestation.dispatchId === dispatchId);
  }
  readonly lateEvents: LateEvent[] = [];
  async recordLateEvent(late: LateEvent): Promise<void> {
    if (!this.lateEvents.some((known) => known.runId === late.runId && known.seq === late.seq)) this.lateEvents.push(late);
  }
  /** What each rejection was also shown to (CONTRACT §15 v3), by message id. */
  readonly rejectionAudiences = new Map<string, RejectionAudience>();
  async putRejection(rejection: Rejection, audience: RejectionAudience = { origin: false, dispatch: false }): Promise<PutOutcome<Rejection>> {
    const existing = this.rejections.get(rejection.messageId);
    this.rejectionAudiences.set(rejection.messageId, audience);
    if (existing) return { kind: 'exists', existing };
    this.rejections.set(rejection.messageId, rejection);
    return { kind: 'written' };
  }
  async listOriginRejections(origin: string, options: { limit: number; cursor?: string | undefined }): Promise<Page<OriginRejection>> {
    const all = [...this.rejections.values()]
      .filter((rejection) => rejection.origin === origin && this.rejectionAudiences.get(rejection.messageId)?.origin)
      .sort((a, b) => b.at.localeCompare(a.at))
      .map(({ messageId, at, reason, dispatchId, bodyPreview, bodyBytes }) => ({ messageId, at, reason, dispatchId, origin, bodyPreview, bodyBytes }));
    const start = options.cursor ? Number(options.cursor) : 0;
    return { items: all.slice(start, start + options.limit), cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  async listRefusals(dispatchId: string, origin: string, limit: number): Promise<Refusal[]> {
    return [...this.rejections.values()]
      .filter((rejection) => rejection.dispatchId === dispatchId && rejection.origin === origin && this.rejectionAudiences.get(rejection.messageId)?.dispatch)
      .sort((a, b) => b.at.localeCompare(a.at))
      .slice(0, limit)
      .map(({ messageId, at, reason }) => ({ messageId, at, reason }));
  }
  async listRejections(options: { limit: number; cursor?: string | undefined }): Promise<Page<Rejection>> {
    const all = [...this.rejections.values()].sort((a, b) => b.at.localeCompare(a.at));
    const start = options.cursor ? Number(options.cursor) : 0;
    const items = all.slice(start, start + options.limit);
    return { items, cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  async listOriginDispatches(origin: string, options: { limit: number; cursor?: string | undefined; status?: string | undefined }): Promise<Page<DispatchState>> {
    const all = [...this.states.values()]
      .filter((state) => state.origin === origin && (!options.status || state.execution.status === options.status || state.phase === options.status))
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const start = options.cursor ? Number(options.cursor) : 0;
    return { items: all.slice(start, start + options.limit), cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  async listResults(origin: string, options: { limit: number; cursor?: string | undefined; state: string | undefined }): Promise<Page<DispatchState>> {
    const all = [...this.states.values()]
      .filter((state) => state.origin === origin && state.result && (!options.state || state.result.state === options.state))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    const start = options.cursor ? Number(options.cursor) : 0;
    return { items: all.slice(start, start + options.limit), cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  async listAttention(options: { kind?: AttentionKind | undefined; limit: number; cursor?: string | undefined }): Promise<Page<DispatchState>> {
    const all = ATTENTION_KINDS.filter((kind) => !options.kind || kind === options.kind).flatMap((kind) =>
      // As the feed index orders it: by when the problem began, newest first.
      [...this.states.values()].filter((state) => attentionKind(state) === kind).sort((a, b) => (b.attentionSince ?? b.updatedAt).localeCompare(a.attentionSince ?? a.updatedAt)),
    );
    const start = options.cursor ? Number(options.cursor) : 0;
    return { items: all.slice(start, start + options.limit), cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  async listDispatches(options: { limit: number; cursor?: string | undefined; filter?: DispatchFilter | undefined }): Promise<Page<DispatchState>> {
    const all = [...this.states.values()].filter((state) => matchesFilter(state, options.filter ?? {})).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const start = options.cursor ? Number(options.cursor) : 0;
    return { items: all.slice(start, start + options.limit), cursor: start + options.limit < all.length ? String(start + options.limit) : null };
  }
  /** The counts of the states held now (what the table's counters add up to once the publisher has caught up). */
  async readCounts(): Promise<Counts> {
    return countsOf(sumDeltas([...this.states.values()].map((state) => countDelta(undefined, state))));
  }
  async deferDue(due: DueEntry, until: Date): Promise<void> {
    const state = this.states.get(due.dispatchId);
    if (state?.dueAt === due.dueAt) this.states.set(due.dispatchId, { ...state, dueAt: until.toISOString() });
  }
  readonly dueShards: readonly string[] = DUE_SHARD_KEYS;
  /** As the table's sharded index answers: one shard's due entries, longest due first (then by key), page after page from where the last ended. */
  async *duePages(shard: string, now: Date, pageSize: number): AsyncGenerator<DueEntry[], void, undefined> {
    let after: DueEntry | undefined;
    const beyond = (entry: DueEntry): boolean => !after || entry.dueAt > after.dueAt || (entry.dueAt === after.dueAt && entry.dispatchId > after.dispatchId);
    for (;;) {
      const page = [...this.states.values()]
        .flatMap((state) => (state.dueAt !== null && dueShardOf(state.dispatchId) === shard && state.dueAt <= now.toISOString() ? [{ dispatchId: state.dispatchId, dueAt: state.dueAt }] : []))
        .filter(beyond)
        .sort((a, b) => a.dueAt.localeCompare(b.dueAt) || a.dispatchId.localeCompare(b.dispatchId))
        .slice(0, pageSize);
      after = page[page.length - 1];
      yield page;
      if (page.length < pageSize) return;
    }
  }
  /** Each due shard's claim: who holds it, until when. */
  readonly dueClaims = new Map<string, { readonly holder: string; readonly until: string }>();
  async claimDueShard(shard: string, holder: string, now: Date, until: Date): Promise<boolean> {
    const held = this.dueClaims.get(shard);
    if (held && held.holder !== holder && held.until >= now.toISOString()) return false;
    this.dueClaims.set(shard, { holder, until: until.toISOString() });
    return true;
  }
  async releaseDueShard(shard: string, holder: string): Promise<void> {
    if (this.dueClaims.get(shard)?.holder === holder) this.dueClaims.delete(shard);
  }
  readonly originSettings = new Map<string, OriginSettings>();
  readonly resultBodies = new Map<string, ResultBody>();

  async getOriginSettings(origin: string): Promise<OriginSettings> {
    return this.originSettings.get(origin) ?? DEFAULT_ORIGIN_SETTINGS;
  }

  async putOriginSettings(origin: string, settings: Partial<OriginSettings>): Promise<void> {
    this.originSettings.set(origin, { ...DEFAULT_ORIGIN_SETTINGS, ...settings });
  }

  readonly lambdaFailures = new Map<string, LambdaFailureRecord>();
  async putLambdaFailure(failure: LambdaFailureRecord): Promise<PutOutcome<LambdaFailureRecord>> {
    const key = `${failure.dispatchId}/${failure.attempt}`;
    const existing = this.lambdaFailures.get(key);
    if (existing) return { kind: 'exists', existing };
    this.lambdaFailures.set(key, failure);
    return { kind: 'written' };
  }
  async getLambdaFailure(dispatchId: string, attempt: number): Promise<LambdaFailureRecord | undefined> {
    return this.lambdaFailures.get(`${dispatchId}/${attempt}`);
  }

  readonly approvalTokens = new Map<string, ApprovalTokenRecord>();
  async putApprovalToken(token: ApprovalTokenRecord): Promise<PutOutcome<ApprovalTokenRecord>> {
    const key = `${token.dispatchId}/${token.approvalId}`;
    const existing = this.approvalTokens.get(key);
    if (existing) return { kind: 'exists', existing };
    this.approvalTokens.set(key, token);
    return { kind: 'written' };
  }


  async putResultBody(body: ResultBody): Promise<void> {
    this.resultBodies.set(`${body.dispatchId}/${body.attempt}/${body.seq}/${body.digest ?? ''}`, body);
  }

  async getResultBody(dispatchId: string, attempt: number, seq: number, digest?: string): Promise<ResultBody | undefined> {
    return this.resultBodies.get(`${dispatchId}/${attempt}/${seq}/${digest ?? ''}`);
  }

  async getTarget(name: string) {
    return this.targets.get(name);
  }
  async putTarget(target: TargetRegistration) {
    this.targets.set(target.name, target);
    const rev = (this.registrationRevs.get(target.name) ?? 0) + 1;
    this.registrationRevs.set(target.name, rev);
    if (target.maxConcurrentRuns !== undefined || this.slots.has(target.name)) await this.syncSlotCaps(target.name, target.maxConcurrentRuns, { rev });
  }

  /** Slot counters by target (the table's `SLOT#…` items). */
  readonly slots = new Map<string, MutableShard[]>();

  /** The table's slot accounting (ledger-table `slotUpdates`): taken against the shard's cap, given back, unknown holders counted. */
  private applySlots(from: DispatchState, next: DispatchState): boolean {
    const unknown = (state: DispatchState) => state.execution.status === 'unknown';
    if (next.slot && !from.slot) {
      const shard = this.slots.get(next.target)?.[next.slot.shard];
      if (!shard || shard.held >= shard.cap) return false;
      shard.held += 1;
      shard.lastOrigin = next.origin;
      shard.takenAt = next.slot.at;
    } else if (from.slot && !next.slot) {
      const shard = this.slots.get(from.target)?.[from.slot.shard];
      if (shard) {
        shard.held -= 1;
        if (unknown(from)) shard.unknownHeld -= 1;
      }
    } else if (from.slot && next.slot && unknown(from) !== unknown(next)) {
      const shard = this.slots.get(next.target)?.[next.slot.shard];
      if (shard) shard.unknownHeld += unknown(next) ? 1 : -1;
    }
    return true;
  }
  async slotShards(target: string): Promise<SlotShard[]> {
    return (this.slots.get(target) ?? []).map((shard) => ({ ...shard }));
  }
  /** Registration revisions (the table's `registrationRev`) and the one each target's caps were written for. */
  private readonly registrationRevs = new Map<string, number>();
  private readonly capsRevs = new Map<string, number>();
  async alignSlotCaps(target: string): Promise<void> {
    const rev = this.registrationRevs.get(target);
    if (rev !== undefined && (this.capsRevs.get(target) ?? 0) < rev) await this.syncSlotCaps(target, this.targets.get(target)?.maxConcurrentRuns, { rev });
  }
  async syncSlotCaps(target: string, limit: number | undefined, options: SlotCapsWrite = {}): Promise<void> {
    if (options.rev !== undefined && (this.capsRevs.get(target) ?? 0) > options.rev) return;
    if (options.onlyIfNone && this.slots.has(target)) return;
    if (options.rev !== undefined) this.capsRevs.set(target, options.rev);
    const shards = this.slots.get(target) ?? [];
    const caps = (limit === undefined ? undefined : allotSlotCaps(limit, shards.map((shard) => shard.held))) ?? shards.map(() => 0);
    const allottedAt = new Date().toISOString();
    for (let shard = 0; shard < Math.max(caps.length, shards.length); shard += 1) {
      const existing = shards[shard];
      if (existing) {
        existing.cap = caps[shard] ?? 0;
        existing.limit = limit ?? 0;
        existing.allottedAt = allottedAt;
      } else shards[shard] = { shard, cap: caps[shard] ?? 0, limit: limit ?? 0, held: 0, unknownHeld: 0, lastOrigin: null, allottedAt };
    }
    this.slots.set(target, shards);
  }
  async settleSlotCaps(target: string): Promise<void> {
    const shards = await this.slotShards(target);
    if (wantsAllotment(shards)) await this.syncSlotCaps(target, slotLimit(shards));
  }
  async limitedTargets(): Promise<string[]> {
    return [...this.slots.keys()].sort();
  }
  private waiting(target: string): WaitingEntry[] {
    return [...this.states.values()]
      .filter((state) => state.target === target && state.phase === 'accepted' && state.waitingFor === 'capacity')
      .map((state) => ({ dispatchId: state.dispatchId, origin: state.origin, priority: state.priority ?? DEFAULT_PRIORITY, createdAt: state.sentAt ?? state.createdAt }));
  }
  async nextWaiting(target: string, lastOrigin: string | null, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
    return nextAdmission(this.waiting(target).filter((entry) => !exclude.has(entry.dispatchId)), lastOrigin);
  }
  async countWaiting(target: string, max: number): Promise<number> {
    return Math.min(max, this.waiting(target).length);
  }
  async resolve(principalId: string) {
    return this.principals.get(principalId);
  }
}
