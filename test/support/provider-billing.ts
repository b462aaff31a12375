// The provider's own record of what it billed: the simulator's serverless billing history (as
// RunPod serves GET /v2/billing/serverless), micro-USD per hourly bucket of one endpoint.
import { SIM_KEY } from "./stack.js";

const H = 3_600_000;

/** Bucket start (ms) → micro-USD, over the hours from `fromMs` to `toMs` (snapped to hours). */
export async function providerBuckets(
  simUrl: string,
  endpointId: string,
  fromMs: number,
  toMs: number,
): Promise<Map<number, number>> {
  const from = new Date(Math.floor(fromMs / H) * H).toISOString();
  const to = new Date(Math.ceil(toMs / H) * H).toISOString();
  const res = await fetch(
    `${simUrl}/v2/billing/serverless?bucketSize=hour&startTime=${from}&endTime=${to}&serverlessId=${endpointId}`,
    { headers: { authorization: `Bearer ${SIM_KEY}` } },
  );
  const body = (await res.json()) as { records: Array<{ startTime: string; totalAmount: number }> };
  return new Map(body.records.map((r) => [Date.parse(r.startTime), Math.round(r.totalAmount * 1e6)]));
}
