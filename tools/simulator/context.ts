import type { Logger } from "pino";
import type { CallbackSender } from "./callbacks.js";
import type { Clock } from "./clock.js";
import type { Engine } from "./engine.js";
import type { MeterStore } from "./meters.js";
import type { Faults, ResolvedOptions } from "./options.js";
import type { PaymentSender } from "./payment.js";
import type { Rng } from "./random.js";

// What the route handlers share. One per simulator instance.

export interface SimulatorStats {
  /** Requests to the job API, REST v2 and /graphql (inspection routes are not counted). */
  requests: number;
  /** Of those, requests to REST v2 management (/v2/serverless...). */
  restRequests: number;
  /** Of those, requests to /graphql, answered or refused as retired. */
  graphqlRequests: number;
  rateLimited: number;
  /** Injected 5xx answers. */
  serverErrors: number;
  lostRunAnswers: number;
  /** /run calls that reached the engine, including deduplicated ones. */
  submissions: number;
  /** /run calls answered with an existing job because its id was already known. */
  duplicateSubmissions: number;
}

export interface SimContext {
  opts: ResolvedOptions;
  clock: Clock;
  engine: Engine;
  callbacks: CallbackSender;
  payment: PaymentSender;
  /** The payment provider's billing meters and the events they hold. */
  meters: MeterStore;
  /** Per-request randomness (faults); job-level choices hash the job id instead. */
  requestRng: Rng;
  /** Generated ids (endpoints created over GraphQL). */
  idRng: Rng;
  faults(): Faults;
  setFaults(f: Faults): void;
  stats: SimulatorStats;
  log?: Logger;
}
