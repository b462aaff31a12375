// Parsing of provider answers shared by the job API and both management APIs.
import type { z } from "zod";
import { ProviderError } from "./errors.js";

export function parseBody<S extends z.ZodType>(
  op: string,
  text: string,
  schema: S,
  details: { mayHaveBeenAccepted?: boolean } = {},
): z.output<S> {
  const result = schema.safeParse(safeJson(text));
  if (!result.success) throw badShape(op, result.error, details);
  return result.data;
}

export function badShape(
  op: string,
  error: z.ZodError,
  details: { mayHaveBeenAccepted?: boolean } = {},
): ProviderError {
  const where = error.issues
    .slice(0, 3)
    .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
    .join("; ");
  return new ProviderError("BAD_RESPONSE", `GPU provider ${op}: unexpected answer (${where})`, details);
}

export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
