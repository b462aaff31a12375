// Endpoint management over RunPod's GraphQL API ({baseUrl}/graphql). Deprecated by RunPod and due
// to retire in early 2027 (https://docs.runpod.io/sdks/graphql/configurations); kept for accounts
// that still use it (GPU_PROVIDER_MANAGEMENT_API=graphql).
import type { z } from "zod";
import { ProviderError, errorFromGraphQL, errorFromResponse } from "./errors.js";
import type {
  CallContext,
  EndpointManagement,
  KeyIdentity,
  ManagementTransport,
  NewEndpoint,
  RawAnswer,
  WorkersChange,
} from "./management.js";
import { badShape, safeJson } from "./parse.js";
import {
  ENDPOINT_FIELDS,
  ENDPOINT_SELECTION,
  GraphQLResponse,
  MyselfEndpoints,
  MyselfId,
  SavedEndpoint,
  type ProviderEndpoint,
} from "./schemas.js";

const CHECK_KEY_QUERY = "query { myself { id } }";
const LIST_ENDPOINTS_QUERY = `query Endpoints { myself { endpoints { ${ENDPOINT_SELECTION} } } }`;
const SAVE_ENDPOINT_MUTATION = `mutation SaveEndpoint($input: EndpointInput!) { saveEndpoint(input: $input) { ${ENDPOINT_SELECTION} } }`;

export class GraphQLManagement implements EndpointManagement {
  readonly api = "graphql" as const;

  constructor(private readonly t: ManagementTransport) {}

  /** The runbook's key check. A key that authenticates but has no identity counts as invalid. */
  async checkKey(): Promise<KeyIdentity> {
    const data = await this.#call({ op: "checkKey" }, CHECK_KEY_QUERY, undefined, MyselfId);
    if (data.myself === null) {
      throw new ProviderError("INVALID_API_KEY", "GPU provider checkKey: the key has no account");
    }
    return { accountId: data.myself.id, via: "graphql" };
  }

  async listEndpoints(): Promise<ProviderEndpoint[]> {
    const data = await this.#call({ op: "listEndpoints" }, LIST_ENDPOINTS_QUERY, undefined, MyselfEndpoints);
    if (data.myself === null) {
      throw new ProviderError("INVALID_API_KEY", "GPU provider listEndpoints: the key has no account");
    }
    return data.myself.endpoints ?? [];
  }

  /** GraphQL has no single-endpoint read the SDKs use: the list, filtered. */
  async getEndpoint(id: string): Promise<ProviderEndpoint> {
    const found = (await this.listEndpoints()).find((e) => e.id === id);
    if (found === undefined) {
      throw new ProviderError("ENDPOINT_NOT_FOUND", `GPU provider getEndpoint: no endpoint ${id}`);
    }
    return found;
  }

  /** Read, change, write back every field: the only safe way to change workers with a full replace. */
  async updateEndpointWorkers(id: string, change: WorkersChange): Promise<ProviderEndpoint> {
    const current = (await this.listEndpoints()).find((e) => e.id === id);
    if (current === undefined) {
      throw new ProviderError("ENDPOINT_NOT_FOUND", `GPU provider updateEndpointWorkers: no endpoint ${id}`);
    }
    const next: ProviderEndpoint = { ...current };
    if (change.workersMin !== undefined) next.workersMin = change.workersMin;
    if (change.workersMax !== undefined) next.workersMax = change.workersMax;
    if (change.idleTimeout !== undefined) next.idleTimeout = change.idleTimeout;
    if (next.workersMin > next.workersMax) {
      throw new ProviderError(
        "BAD_REQUEST",
        `GPU provider updateEndpointWorkers: workersMin ${next.workersMin} exceeds workersMax ${next.workersMax}`,
      );
    }
    return this.saveEndpoint(next);
  }

  createEndpoint(spec: NewEndpoint): Promise<ProviderEndpoint> {
    return this.saveEndpoint({
      name: spec.name,
      templateId: spec.templateId,
      gpuIds: spec.gpuIds.join(","),
      workersMin: spec.workersMin,
      workersMax: spec.workersMax,
      idleTimeout: spec.idleTimeout,
      ...(spec.gpuCount !== undefined && { gpuCount: spec.gpuCount }),
    } as ProviderEndpoint);
  }

  /**
   * saveEndpoint is a full replace: every field of ENDPOINT_FIELDS that `endpoint` carries is sent
   * back, so pass an object read from listEndpoints. Fields outside that set are not sent (the
   * provider's EndpointInput would reject them). Without an id it creates an endpoint.
   */
  async saveEndpoint(endpoint: ProviderEndpoint): Promise<ProviderEndpoint> {
    const input: Record<string, unknown> = {};
    for (const field of ENDPOINT_FIELDS) {
      const value = endpoint[field];
      if (value === undefined) continue;
      // Read as [{networkVolumeId, dataCenterId?}], written as [{networkVolumeId}] (runpodctl).
      input[field] =
        field === "networkVolumeIds" && Array.isArray(value)
          ? value.map((v: unknown) => ({
              networkVolumeId: (v as { networkVolumeId?: unknown }).networkVolumeId,
            }))
          : value;
    }
    const ctx = { op: "saveEndpoint", ...(endpoint.id !== undefined && { endpointId: endpoint.id }) };
    const data = await this.#call(ctx, SAVE_ENDPOINT_MUTATION, { input }, SavedEndpoint);
    if (data.saveEndpoint === null) {
      throw new ProviderError("BAD_RESPONSE", "GPU provider saveEndpoint: no endpoint in the answer");
    }
    return data.saveEndpoint;
  }

  #call<S extends z.ZodType>(
    ctx: CallContext,
    query: string,
    variables: Record<string, unknown> | undefined,
    dataSchema: S,
  ): Promise<z.output<S>> {
    const body = variables === undefined ? { query } : { query, variables };
    const handle = (res: RawAnswer): z.output<S> => {
      const parsed =
        res.status >= 200 && res.status <= 400 ? GraphQLResponse.safeParse(safeJson(res.text)) : undefined;
      // GraphQL errors ride on 200 (and on 400 for validation); map them by message.
      if (parsed?.success && parsed.data.errors !== undefined && parsed.data.errors.length > 0) {
        const err = errorFromGraphQL(
          parsed.data.errors.map((e) => e.message),
          { op: ctx.op, secret: this.t.secret },
        );
        throw res.status === 400 && err.code === "PROVIDER_UNAVAILABLE"
          ? new ProviderError("BAD_REQUEST", err.message, { status: 400 })
          : err;
      }
      if (res.status < 200 || res.status > 299) {
        throw errorFromResponse(res.status, res.text, {
          op: ctx.op,
          retryAfter: res.headers["retry-after"],
          secret: this.t.secret,
        });
      }
      if (!parsed?.success)
        throw new ProviderError("BAD_RESPONSE", `GPU provider ${ctx.op}: answer is not GraphQL JSON`);
      const data = dataSchema.safeParse(parsed.data.data);
      if (!data.success) throw badShape(ctx.op, data.error);
      return data.data;
    };
    return this.t.exchange(ctx, "POST", `${this.t.baseUrl}/graphql`, body, handle);
  }
}
