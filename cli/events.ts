import { createReadStream, existsSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { parseCommandArgs } from './args.js';
import { CONNECTION_OPTIONS, LedgerConnectionError, localInfo, resolveConnection } from './connect.js';
import { shown } from './table.js';

interface LoggedEvent {
  readonly time?: string;
  readonly 'detail-type'?: string;
  readonly detail?: { readonly dispatchId?: string; readonly runId?: string; readonly reason?: string; readonly monitorStatus?: string; readonly nativeStatus?: string; readonly messageId?: string; readonly receiptId?: string; readonly kind?: string; readonly state?: string };
}

/** One logged event as a line for people (each value escaped: run ids and reasons may come from a target), or the line itself with --json. */
export function describeEvent(line: string, json: boolean): string {
  if (json) return line;
  let event: LoggedEvent;
  try {
    event = JSON.parse(line) as LoggedEvent;
  } catch {
    return shown`${line}`;
  }
  const detail = event.detail ?? {};
  const subject = detail.dispatchId ?? (detail.messageId ? `message ${detail.messageId}` : '');
  const extra = [
    detail.receiptId && shown`receipt ${detail.receiptId}: ${detail.kind ?? '?'} ${detail.state ?? '?'}`,
    detail.runId && shown`run ${detail.runId}`,
    detail.nativeStatus && shown`target: ${detail.nativeStatus}`,
    detail.monitorStatus && shown`monitor: ${detail.monitorStatus}`,
    detail.reason && shown`reason: ${detail.reason}`,
  ]
    .filter(Boolean)
    .join(', ');
  return `${shown`${event.time ?? ''}`}  ${shown`${event['detail-type'] ?? '?'}`.padEnd(22)} ${shown`${subject}`}${extra ? `  (${extra})` : ''}`;
}

/** Prints the lines of `file` from byte `from`; returns where it stopped. */
async function printFrom(file: string, from: number, print: (line: string) => void, json: boolean, dispatchId: string | undefined): Promise<number> {
  const size = statSync(file).size;
  if (size <= from) return size < from ? 0 : from;
  const lines = createInterface({ input: createReadStream(file, { start: from, end: size - 1 }) });
  for await (const line of lines) {
    if (!line.trim()) continue;
    if (dispatchId && !line.includes(`"dispatchId":"${dispatchId}"`)) continue;
    print(describeEvent(line, json));
  }
  return size;
}

/**
 * `ledger events [--follow] [--dispatch ID] [--json]`: the local bus's event log, as EventBridge
 * delivered it. Local only: a deployed bus keeps no log to read back, so `--stack`/`--api-url` are
 * refused with where to look instead.
 */
export async function events(args: string[], print: (line: string) => void): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, follow: { type: 'boolean', short: 'f', default: false }, dispatch: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (resolveConnection(values).kind !== 'local') {
    throw new LedgerConnectionError(
      'ledger events reads the local platform\'s event log only; on a deployed stack the events are on its EventBridge bus (the stack output EventBusName): add a rule there (to CloudWatch Logs, say) to keep them',
    );
  }
  const file = localInfo().eventLog;
  if (!existsSync(file)) return 0;
  let offset = await printFrom(file, 0, print, values.json, values.dispatch);
  while (values.follow) {
    await sleep(500);
    if (!existsSync(file)) return 0;
    offset = await printFrom(file, offset, print, values.json, values.dispatch);
  }
  return 0;
}
