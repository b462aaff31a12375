// The GPU provider client: the only module that talks to the provider's HTTP APIs.
export { GpuProviderClient, type GpuProviderClientOptions, type SubmitRequest } from "./client.js";
export { type KeyIdentity, type ManagementApi } from "./management.js";
export { ProviderError, isProviderError, type ProviderErrorCode } from "./errors.js";
export {
  EndpointHealthReport,
  ProviderEndpoint,
  ProviderJob,
  TERMINAL_STATUSES,
  type ProviderJobStatus,
} from "./schemas.js";
