// A provider job id goes into a URL path (/v2/{endpoint}/status/{id}, /cancel/{id}). RunPod's ids
// are server-made: `<uuid>`, `<uuid>-u1`, `sync-<uuid>-e1`, ...; ours, sent as the submission id, are
// MediaJob job ids (letters, digits, '.', '_', ':' and '-', starting with a letter or digit). An id
// that came from outside (a callback body) is checked against that shape before it is used, so it
// can never be a dot segment (`..` would make the request `GET /v2/{endpoint}/`, with the API key)
// or carry a path of its own.
export const PROVIDER_JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,191}$/;

export const isProviderJobId = (id: unknown): id is string =>
  typeof id === "string" && PROVIDER_JOB_ID.test(id);
