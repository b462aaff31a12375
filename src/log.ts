// One logger shape for every process: JSON lines, secrets and tokens redacted wherever they sit.
import { pino, type Logger } from "pino";

const REDACT_PATHS = [
  "apiKey",
  "*.apiKey",
  "secret",
  "*.secret",
  "token",
  "*.token",
  "authorization",
  "*.authorization",
  "req.headers.authorization",
  "req.headers['stripe-signature']",
  "headers.authorization",
  "headers['stripe-signature']",
];

export function createLogger(level: string, name: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { name, level, redact: { paths: REDACT_PATHS, censor: "[REDACTED]" }, base: { pid: process.pid } },
    destination ?? process.stdout,
  );
}
