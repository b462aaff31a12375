// metav1.Condition helpers, after apimachinery's meta.SetStatusCondition: lastTransitionTime
// moves only when the status changes.
import type { Condition, ConditionStatus } from "./common.js";

export interface ConditionInput {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}

export function setCondition(
  conditions: Condition[] | undefined,
  input: ConditionInput,
  now: string,
  observedGeneration?: number,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const previous = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message.slice(0, 32768),
    lastTransitionTime: previous && previous.status === input.status ? previous.lastTransitionTime : now,
    ...(observedGeneration !== undefined ? { observedGeneration } : {}),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function getCondition(conditions: Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
