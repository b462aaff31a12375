import type { IncomingMessage, ServerResponse } from "node:http";

// Plumbing shared by the simulator's routes: replies are values, so fault injection can replace
// an answer after the work was done (a 5xx that hides an accepted job).

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Reset the connection instead of answering: the work was done, the answer is lost. */
  lost?: boolean;
}

export const json = (status: number, body?: unknown, headers?: Record<string, string>): Reply => ({
  status,
  ...(body !== undefined && { body }),
  ...(headers !== undefined && { headers }),
});

export function writeReply(res: ServerResponse, reply: Reply): void {
  if (reply.lost === true) {
    res.socket?.destroy();
    return;
  }
  const text = reply.body === undefined ? "" : JSON.stringify(reply.body);
  res.writeHead(reply.status, {
    ...(text !== "" && { "content-type": "application/json; charset=utf-8" }),
    "content-length": Buffer.byteLength(text).toString(),
    ...reply.headers,
  });
  res.end(text);
}

export class BodyTooLarge extends Error {}
export class BadJson extends Error {}

/**
 * Reads the whole body; past `limit` bytes it keeps draining but drops the data, then throws.
 * Leaving the loop early would destroy the socket and the client would never see the 413.
 */
export async function readText(req: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size <= limit) chunks.push(chunk as Buffer);
  }
  if (size > limit) throw new BodyTooLarge();
  return Buffer.concat(chunks).toString("utf8");
}

export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const text = await readText(req, limit);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new BadJson();
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The API key of a request: `Authorization: Bearer <key>`, a bare key (RunPod accepts both), or ?api_key=. */
export function requestKey(req: IncomingMessage, url: URL, allowQuery: boolean): string | undefined {
  const header = req.headers.authorization;
  if (typeof header === "string" && header.trim() !== "") {
    const m = /^Bearer\s+(.+)$/i.exec(header.trim());
    return (m?.[1] ?? header).trim();
  }
  return allowQuery ? (url.searchParams.get("api_key") ?? undefined) : undefined;
}
