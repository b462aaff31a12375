import type { IncomingMessage } from "node:http";
import { z } from "zod";
import type { SimContext } from "./context.js";
import { configFromSpec, graphqlView, patchConfig } from "./endpoints.js";
import { statusView, type EndpointConfig } from "./engine.js";
import { isRecord, json, readJson, type Reply } from "./http.js";
import {
  EndpointPatchSchema,
  FaultsSchema,
  MeterSpecSchema,
  PaymentWebhookSchema,
  type EndpointPatch,
} from "./options.js";

// /_sim/*: the simulator's inspection and control API for tests, the CLI tests and the demo
// (other processes). JSON in and out, no authentication (the server listens on loopback only).

const LIMIT = 1024 * 1024;

export function endpointView(ctx: SimContext, config: EndpointConfig) {
  return { ...graphqlView(config), workload: config.workload, health: ctx.engine.health(config.id) };
}

/** Patches an existing endpoint, or creates one (then `name` is required). */
export function applyEndpoint(ctx: SimContext, spec: { id?: string } & EndpointPatch): EndpointConfig {
  const existing = spec.id === undefined ? undefined : ctx.engine.endpoint(spec.id);
  if (existing !== undefined) {
    const next = patchConfig(existing, spec);
    ctx.engine.upsertEndpoint(next);
    return next;
  }
  if (spec.name === undefined) throw new Error("name is required to create an endpoint");
  const config = configFromSpec({ ...spec, name: spec.name });
  ctx.engine.upsertEndpoint(config);
  return config;
}

export function jobView(ctx: SimContext, id: string) {
  const job = ctx.engine.find(id);
  if (job === undefined) return undefined;
  return {
    ...statusView(job),
    endpointId: job.endpointId,
    key: job.key,
    executions: ctx.engine.executions(job.key),
    timeline: { ...job.timeline },
    /** The input as submitted (the submission identity a worker may deduplicate on included). */
    input: job.input,
    ...(job.lowPriority && { lowPriority: true }),
  };
}

// Provider requests by route, so tests and benchmarks can count what a client asked: method and
// path, with anything past /v2/{endpoint}/{operation} (a job id) folded into ":id".
const routeCounts = new WeakMap<SimContext, Map<string, number>>();

export function countRequest(ctx: SimContext, method: string | undefined, pathname: string): void {
  const parts = pathname.split("/").filter((p) => p !== "");
  const route = `${method ?? "GET"} /${[...parts.slice(0, 3), ...(parts.length > 3 ? [":id"] : [])].join("/")}`;
  const counts = routeCounts.get(ctx) ?? new Map<string, number>();
  routeCounts.set(ctx, counts);
  counts.set(route, (counts.get(route) ?? 0) + 1);
}

function invalid(error: z.ZodError): Reply {
  return json(400, { error: z.prettifyError(error) });
}

export async function handleInspection(
  ctx: SimContext,
  req: IncomingMessage,
  parts: string[],
): Promise<Reply> {
  const method = req.method ?? "GET";
  // The second segment is an id, except under payment/ whose routes are fixed names.
  const route = `${method} ${parts.map((p, i) => (i === 1 && parts[0] !== "payment" ? ":id" : p)).join("/")}`;
  const id = parts[1] ?? "";
  switch (route) {
    case "GET executions":
      return json(200, { executions: Object.fromEntries(ctx.engine.allExecutions()) });
    case "GET executions/:id":
      return json(200, { id, executions: ctx.engine.executions(id) });
    case "GET deliveries":
      return json(200, { deliveries: ctx.callbacks.deliveries(), dropped: ctx.callbacks.dropped() });
    case "GET stats":
      return json(200, ctx.stats);
    case "GET requests":
      return json(200, { requests: Object.fromEntries(routeCounts.get(ctx) ?? []) });
    case "GET faults":
      return json(200, ctx.faults());
    case "PUT faults": {
      const parsed = FaultsSchema.safeParse((await readJson(req, LIMIT)) ?? {});
      if (!parsed.success) return invalid(parsed.error);
      ctx.setFaults(parsed.data);
      return json(200, ctx.faults());
    }
    case "GET endpoints":
      return json(200, { endpoints: ctx.engine.endpoints().map((c) => endpointView(ctx, c)) });
    case "GET endpoints/:id": {
      const config = ctx.engine.endpoint(id);
      return config === undefined
        ? json(404, { error: "endpoint not found" })
        : json(200, endpointView(ctx, config));
    }
    case "PUT endpoints/:id": {
      const parsed = EndpointPatchSchema.safeParse((await readJson(req, LIMIT)) ?? {});
      if (!parsed.success) return invalid(parsed.error);
      if (ctx.engine.endpoint(id) === undefined && parsed.data.name === undefined) {
        return json(400, { error: "name is required to create an endpoint" });
      }
      return json(200, endpointView(ctx, applyEndpoint(ctx, { ...parsed.data, id })));
    }
    case "DELETE endpoints/:id":
      return ctx.engine.removeEndpoint(id) ? json(204) : json(404, { error: "endpoint not found" });
    case "GET jobs/:id": {
      const view = jobView(ctx, id);
      return view === undefined ? json(404, { error: "job not found" }) : json(200, view);
    }
    case "GET ended-jobs":
      // Every job that ended with the times it reported, also after its status expired: the GPU
      // seconds the provider bills (the chaos run compares them with what was metered).
      return json(200, { jobs: ctx.engine.endedJobs() });
    case "GET worker-ledger":
      // What the GPU provider bills: every worker run, spawn to stop, with its billed seconds
      // (rounded up per run) and amount in micro-USD (worker-ledger.ts).
      return json(200, { runs: ctx.engine.workerRuns() });
    case "GET worker-ledger/:id":
      return json(200, { runs: ctx.engine.workerRuns(id) });
    case "GET jobs/:id/key": {
      // Which of our jobs a provider id was submitted for, as the provider's console shows it,
      // also after its status expired (the chaos run's operator checks adoptions with it).
      const key = ctx.engine.keyOf(id);
      return key === undefined ? json(404, { error: "job not found" }) : json(200, { id, key });
    }
    case "POST jobs/:id/forget":
      return ctx.engine.forget(id)
        ? json(200, { id, forgotten: true })
        : json(404, { error: "job not found" });
    case "POST jobs/:id/hold":
      ctx.engine.hold(id);
      return json(200, { id, held: true });
    case "POST jobs/:id/release":
      ctx.engine.release(id);
      return json(200, { id, held: false });
    case "GET payment/deliveries":
      return json(200, { deliveries: ctx.payment.deliveries() });
    case "PUT payment/webhook": {
      const parsed = PaymentWebhookSchema.safeParse(await readJson(req, LIMIT));
      if (!parsed.success) return invalid(parsed.error);
      ctx.payment.setWebhook(parsed.data);
      return json(200, { url: parsed.data.url });
    }
    case "POST payment/send": {
      const event = await readJson(req, LIMIT);
      if (!isRecord(event)) return json(400, { error: "body must be a JSON event object" });
      try {
        return json(200, await ctx.payment.send(event));
      } catch (err) {
        return json(409, { error: err instanceof Error ? err.message : String(err) });
      }
    }
    case "GET payment/meters":
      return json(200, {
        meters: ctx.meters.meters(),
        events: ctx.meters.events(),
        errors: ctx.meters.errors(),
      });
    case "POST payment/meters": {
      const parsed = MeterSpecSchema.safeParse(await readJson(req, LIMIT));
      if (!parsed.success) return invalid(parsed.error);
      const m = parsed.data;
      if (ctx.meters.meterFor(m.event_name) !== undefined)
        return json(409, { error: `a meter for event_name ${m.event_name} exists` });
      return json(
        200,
        ctx.meters.createMeter({
          eventName: m.event_name,
          displayName: m.display_name ?? m.event_name,
          formula: m.formula ?? "sum",
          ...(m.id !== undefined && { id: m.id }),
          ...(m.customer_key !== undefined && { customerKey: m.customer_key }),
          ...(m.value_key !== undefined && { valueKey: m.value_key }),
          ...(m.event_time_window !== undefined && { eventTimeWindow: m.event_time_window }),
        }),
      );
    }
    case "POST payment/clock": {
      const parsed = z
        .strictObject({ advanceMs: z.number().int().min(0) })
        .safeParse(await readJson(req, LIMIT));
      if (!parsed.success) return invalid(parsed.error);
      ctx.meters.advance(parsed.data.advanceMs);
      return json(200, { now: ctx.meters.now() });
    }
    default:
      return json(404, { error: "no such inspection route" });
  }
}
