import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A submission the proxy holds: it arrived, and is forwarded only when the test opens the gate. */
interface Held {
  readonly arrived: Promise<void>;
  readonly reach: () => void;
  readonly opened: Promise<void>;
  readonly open: () => void;
  answered: boolean;
  /** The caller gave up on it (closed its connection) before it was answered. */
  abandoned: boolean;
}

/**
 * An HTTP proxy on 127.0.0.1 in front of a target (the demo agent), forwarding every request as it is,
 * except a `POST /runs` whose body names a dispatch the test holds: that one waits until the test calls
 * `open(dispatchId)`. A test uses it to see an order rather than time it: "the caller was answered while the
 * submission it caused was still held" (its caller gives up at its own timeout: `abandoned`).
 */
export interface GatedProxy {
  readonly url: string;
  /** Holds every `POST /runs` for this dispatch until `open`. */
  hold(dispatchId: string): void;
  /** Resolves when the held submission for this dispatch has reached the proxy. */
  arrived(dispatchId: string): Promise<void>;
  /** Whether the held submission has been forwarded and answered. */
  answered(dispatchId: string): boolean;
  /** Whether its caller gave up on the held submission (closed the connection) before it was answered. */
  abandoned(dispatchId: string): boolean;
  /** Lets the held submission through to the target. */
  open(dispatchId: string): void;
  /** Stops: a submission still held is dropped (its connection closed), never forwarded after the test. */
  close(): Promise<void>;
}

export async function startGatedProxy(targetUrl: string): Promise<GatedProxy> {
  const upstream = new URL(targetUrl);
  const held = new Map<string, Held>();
  let closing = false;
  const hold = (dispatchId: string): void => {
    let reach = (): void => undefined;
    let open = (): void => undefined;
    const arrived = new Promise<void>((resolve) => (reach = resolve));
    const opened = new Promise<void>((resolve) => (open = resolve));
    held.set(dispatchId, { arrived, reach, opened, open, answered: false, abandoned: false });
  };
  const server: Server = createServer((incoming, outgoing) => {
    void (async () => {
      const body = await readAll(incoming);
      const entry = incoming.method === 'POST' && incoming.url?.endsWith('/runs') ? held.get(dispatchOf(body) ?? '') : undefined;
      if (entry) {
        outgoing.on('close', () => {
          if (!outgoing.writableFinished) entry.abandoned = true;
        });
        entry.reach();
        await entry.opened;
        if (closing) {
          outgoing.destroy();
          return;
        }
      }
      const forwarded = httpRequest(
        { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.on('error', () => outgoing.destroy());
          answer.on('end', () => entry && (entry.answered = true));
          answer.pipe(outgoing);
        },
      );
      forwarded.on('error', () => outgoing.destroy());
      forwarded.end(body);
    })().catch(() => outgoing.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entryOf = (dispatchId: string): Held => {
    const entry = held.get(dispatchId);
    if (!entry) throw new Error(`no submission of ${dispatchId} is held`);
    return entry;
  };
  return {
    url,
    hold,
    arrived: (dispatchId) => entryOf(dispatchId).arrived,
    answered: (dispatchId) => entryOf(dispatchId).answered,
    abandoned: (dispatchId) => entryOf(dispatchId).abandoned,
    open: (dispatchId) => entryOf(dispatchId).open(),
    close: () => {
      closing = true;
      for (const entry of held.values()) entry.open();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function readAll(incoming: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of incoming) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function dispatchOf(body: Buffer): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && typeof (parsed as { dispatchId?: unknown }).dispatchId === 'string' ? (parsed as { dispatchId: string }).dispatchId : undefined;
  } catch {
    return undefined;
  }
}
