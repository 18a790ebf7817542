import { createReadStream, existsSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ArgumentsError, parseCommandArgs } from './args.js';
import { CONNECTION_OPTIONS, localInfo, resolveConnection } from './connect.js';
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

/**
 * Prints the whole lines of `file` from byte `from`; returns the byte after the last whole line. A line
 * still being written (the log is appended in batches) is left for the next read. Regression: the
 * partial last line was printed, and the next read began after it, so one event came out as two broken
 * lines (and with --dispatch, usually not at all).
 */
export async function printFrom(file: string, from: number, print: (line: string) => void, json: boolean, dispatchId: string | undefined): Promise<number> {
  const size = statSync(file).size;
  if (size <= from) return size < from ? 0 : from;
  const show = (line: string): void => {
    if (!line.trim()) return;
    if (dispatchId && !line.includes(`"dispatchId":"${dispatchId}"`)) return;
    print(describeEvent(line, json));
  };
  let consumed = from;
  let rest: Buffer = Buffer.alloc(0);
  for await (const chunk of createReadStream(file, { start: from, end: size - 1 })) {
    const buffer = rest.length > 0 ? Buffer.concat([rest, chunk as Buffer]) : (chunk as Buffer);
    let start = 0;
    for (let newline = buffer.indexOf(10); newline !== -1; newline = buffer.indexOf(10, start)) {
      show(buffer.subarray(start, newline).toString('utf8'));
      start = newline + 1;
    }
    consumed += start;
    rest = buffer.subarray(start);
  }
  return consumed;
}

/**
 * `ledger events [--follow] [--dispatch ID] [--json]`: the local bus's event log, as EventBridge
 * delivered it. Local only: a deployed bus keeps no log to read back, so `--stack`/`--api-url` are
 * refused with where to look instead.
 */
export async function events(args: string[], print: (line: string) => void): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, follow: { type: 'boolean', short: 'f', default: false }, dispatch: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (resolveConnection(values).kind !== 'local') {
    throw new ArgumentsError(
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
