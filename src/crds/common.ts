// Shared building blocks of the project's custom resources. Each resource is described once, in
// zod: the same schema gives the TypeScript type, the CRD's OpenAPI schema (see openapi.ts) and the
// runtime check of objects read from the API.
import { z } from "zod";

export const GROUP = "media-orchestrator.io";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const CATEGORY = "media";

export const Workload = z
  .enum(["asr", "tts", "render"])
  .describe("The kind of GPU work: asr, tts or render.");
export type Workload = z.infer<typeof Workload>;

/** An RFC 3339 timestamp as the apiserver stores it. */
export const Timestamp = z.iso.datetime({ offset: true });

/** A Kubernetes object name (DNS-1123 subdomain). */
export const ObjectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, "must be a lowercase RFC 1123 name");

/** A free JSON object: handed through untouched (`x-kubernetes-preserve-unknown-fields`). */
export const FreeObject = z
  .record(z.string(), z.unknown())
  .meta({ "x-kubernetes-preserve-unknown-fields": true });

export const ConditionStatus = z.enum(["True", "False", "Unknown"]);
export type ConditionStatus = z.infer<typeof ConditionStatus>;

/** metav1.Condition, with the upstream validation. */
export const Condition = z.object({
  type: z
    .string()
    .max(316)
    .regex(
      /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
    )
    .describe("What the condition is about, in CamelCase (e.g. Succeeded, Ready)."),
  status: ConditionStatus.describe("True, False or Unknown."),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .describe("The metadata.generation the condition was computed from."),
  lastTransitionTime: Timestamp.describe("When the condition last changed its status."),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
    .describe("Why the condition has its status, in CamelCase: for tools and `kubectl wait`."),
  message: z.string().max(32768).describe("Why the condition has its status, for people."),
});
export type Condition = z.infer<typeof Condition>;

export const Conditions = z
  .array(Condition)
  .max(16)
  .meta({
    description: "The latest observations of the object's state (metav1.Condition), one per type.",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
  });

/** The parts of ObjectMeta the product reads. Unknown fields are kept. */
export const ObjectMeta = z
  .object({
    name: z.string(),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    generation: z.number().optional(),
    creationTimestamp: z.union([z.string(), z.date()]).optional(),
    deletionTimestamp: z.union([z.string(), z.date()]).optional(),
    finalizers: z.array(z.string()).optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    ownerReferences: z
      .array(z.looseObject({ uid: z.string(), name: z.string(), kind: z.string() }))
      .optional(),
  })
  .loose();
export type ObjectMeta = z.infer<typeof ObjectMeta>;

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** Everything the CRD generator needs to know about one resource. */
export interface ResourceDefinition {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  /**
   * The rules the schema cannot say (transitions, spec beside status), checked at admission by the
   * resource's ValidatingAdmissionPolicy (src/crds/rules-policy.ts), not as CEL in the CRD.
   */
  admissionRules?: AdmissionRule[];
  printerColumns: PrinterColumn[];
  /**
   * Fields a list may filter on (`fieldSelector`), beyond metadata.name and metadata.namespace:
   * spec.versions[].selectableFields, GA in Kubernetes 1.32
   * (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#crd-selectable-fields).
   */
  selectableFields?: Array<{ jsonPath: string }>;
  description: string;
}

export interface AdmissionRule {
  /** The field the rule guards ("spec.id"), for the API reference. */
  field: string;
  /** CEL over `object` and `oldObject` (the stored object; none on CREATE): true admits. */
  expression: string;
  message: string;
  /** A CEL string expression for the refusal's message, naming what the rule found (else `message`). */
  messageExpression?: string;
  /** A transition rule: checked on UPDATE only, where there is an old object to compare with. */
  onUpdate?: boolean;
  /**
   * A limit that may not be able to finish on some objects (CEL's cost limit): checked by a policy
   * of its own whose failurePolicy is Ignore, so an object it cannot judge is admitted, never
   * refused by an error (rules-policy.ts).
   */
  failOpen?: boolean;
}

export const AGE_COLUMN: PrinterColumn = {
  name: "Age",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
};

/** Printer column for the status of one condition. */
export function conditionColumn(name: string, type: string, priority?: number): PrinterColumn {
  return {
    name,
    type: "string",
    jsonPath: `.status.conditions[?(@.type=="${type}")].status`,
    ...(priority ? { priority } : {}),
  };
}
