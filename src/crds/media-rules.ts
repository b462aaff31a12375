// The MediaJob admission rules about media (docs/design.md, "Media and storage"), as CEL for the
// rules policy (rules-policy.ts), which sees `object.metadata.namespace` where a CRD's own rules
// cannot:
//  - an input reference names an object under the job's own namespace, so a tenant can never have
//    the controller presign a GET of another namespace's media (src/storage/keys.ts checks again);
//  - the inline input is small: spec.input and every then[].input together hold at most
//    INLINE_INPUT_MAX_BYTES, so an object stays far below etcd's request limit and a large input
//    gets this message, never etcd's `ResourceExhausted ... larger than max`.
// CEL has no JSON encoder, so the size is an estimate that never exceeds the JSON text: each key
// and string counts its characters, every other value one byte, down to INLINE_DEPTH levels; a
// list or object nested deeper, or with more than WALKED_ENTRIES entries, counts one byte per entry. The `previous` key of spec.input is the
// controller's (the previous pipeline step's output, at most 256 KiB as status.output keeps it):
// it has its own bound, so a step the controller creates from an admitted pipeline is admitted.
import type { AdmissionRule } from "./common.js";

/** spec.input and the then[].input together, keys and strings counted (the documented limit). */
export const INLINE_INPUT_MAX_BYTES = 512 * 1024;
/** spec.input.previous: status.output's cap (256 KiB of JSON) and the step's names around it. */
const PREVIOUS_MAX_BYTES = 272 * 1024;
/** The levels walked; each one doubles the expression's text (a map branch and a list branch). */
const INLINE_DEPTH = 5;
/**
 * A list or object with more entries is not walked: it counts one byte per entry. CEL's cost limit
 * per expression (about a million operations) would stop a walk of a flat array of 100,000 numbers
 * and refuse a 200 KB input; counted this way, it is admitted.
 */
const WALKED_ENTRIES = 1_000;

/** CEL: the estimated size of the JSON value `x`, walked `depth` more levels. */
function estimate(x: string, depth: number, level = 0): string {
  const leaf = `type(${x}) == string ? size(${x}) : (type(${x}) == map || type(${x}) == list) ? size(${x}) : 1`;
  if (depth === 0) return `(${leaf})`;
  const k = `k${level}`;
  const e = `e${level}`;
  return (
    `(type(${x}) == string ? size(${x}) : (type(${x}) == map || type(${x}) == list) && size(${x}) > ${WALKED_ENTRIES} ? size(${x}) : ` +
    `type(${x}) == map ? ${x}.map(${k}, size(${k}) + ${estimate(`${x}[${k}]`, depth - 1, level + 1)}).sum() : ` +
    `type(${x}) == list ? ${x}.map(${e}, ${estimate(e, depth - 1, level + 1)}).sum() : 1)`
  );
}

/** CEL: every input reference of `media` (an optional) lies under the job's namespace. */
function referencesOwn(media: string): string {
  return (
    `${media}.?inputs.orValue([]).all(i, ` +
    "i.uri.matches('^s3://[^/]+/' + object.metadata.namespace + '(/[^/]+)+$') && " +
    "!i.uri.matches('/[.][.]?(/|$)'))"
  );
}

/**
 * The rules, built when asked (the CRD generator, the rules policy): their CEL is tens of KB of text
 * that a running controller never reads, and its idle memory is a target (docs/benchmarks.md).
 * Spec rules: a write that leaves the spec as it was (a status write, a label or a finalizer) is
 * not judged again, as the policy does not match it (rules-policy.ts).
 */
export function mediaRules(): AdmissionRule[] {
  const input = "object.spec.?input.orValue({})";
  const inlineTotal =
    `(${input}.filter(t, t != 'previous').map(t, size(t) + ${estimate(`${input}[t]`, INLINE_DEPTH - 1)}).sum() + ` +
    `object.spec.?then.orValue([]).map(s, ${estimate("s.?input.orValue({})", INLINE_DEPTH)}).sum())`;
  const previous = estimate("object.spec.?input.?previous.orValue({})", INLINE_DEPTH);
  return [
    {
      field: "spec.media.inputs",
      expression:
        `${referencesOwn("object.spec.?media")} && ` +
        `object.spec.?then.orValue([]).all(s, ${referencesOwn("s.?media")})`,
      message:
        "an input reference (media.inputs[].uri) is s3://<bucket>/<namespace>/<key>, under the job's own namespace",
      messageExpression:
        "'an input reference (media.inputs[].uri) must be s3://<bucket>/' + object.metadata.namespace + " +
        "'/<key>, with no empty, . or .. segments: a job reads only its own namespace\\'s objects'",
    },
    {
      field: "spec.input",
      failOpen: true,
      expression: `${inlineTotal} <= ${INLINE_INPUT_MAX_BYTES}`,
      message: `spec.input and spec.then[].input together hold at most ${INLINE_INPUT_MAX_BYTES / 1024} KiB inline`,
      messageExpression:
        `'spec.input and spec.then[].input together hold at most ${INLINE_INPUT_MAX_BYTES / 1024} KiB inline ' + ` +
        `'(keys and strings counted), this job ' + string(${inlineTotal} / 1024) + ' KiB: ' + ` +
        "'put media in the object store and name it in spec.media.inputs'",
    },
    {
      field: "spec.input.previous",
      failOpen: true,
      expression: `${previous} <= ${PREVIOUS_MAX_BYTES}`,
      message: `spec.input.previous (the previous pipeline step's output) holds at most ${PREVIOUS_MAX_BYTES / 1024} KiB`,
    },
  ];
}
