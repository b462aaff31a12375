// The GPU provider client: the only module that talks to the provider's HTTP APIs.
export {
  GpuProviderClient,
  type GpuProviderClientOptions,
  type KeyCheckResult,
  type SubmitRequest,
} from "./client.js";
export {
  MANAGEMENT_APIS,
  graphqlUnavailable,
  type EndpointManagement,
  type KeyIdentity,
  type ManagementApi,
  type NewEndpoint,
  type WorkersChange,
} from "./management.js";
export {
  ProviderError,
  isProviderError,
  redact,
  type ProviderErrorCode,
  type ProviderErrorDetails,
} from "./errors.js";
export { DEFAULT_RETRY_POLICY, type RetryPolicy } from "./retry.js";
export {
  ENDPOINT_FIELDS,
  EndpointHealthReport,
  PROVIDER_JOB_STATUSES,
  ProviderEndpoint,
  ProviderJob,
  TERMINAL_STATUSES,
  type ProviderJobStatus,
} from "./schemas.js";
