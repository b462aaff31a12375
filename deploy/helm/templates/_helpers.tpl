{{/*
Names. The fullname is the release name, suffixed with the chart name unless the release name
already contains it; cluster-scoped objects add the namespace so that two releases of the same
name in two namespaces never collide.
*/}}
{{- define "media-orchestrator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "media-orchestrator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "media-orchestrator.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "media-orchestrator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "media-orchestrator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object (the generated CRD templates include this one too). */}}
{{- define "media-orchestrator.labels" -}}
helm.sh/chart: {{ include "media-orchestrator.chart" . }}
{{ include "media-orchestrator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: media-orchestrator
{{- end }}

{{- define "media-orchestrator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "media-orchestrator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "media-orchestrator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "media-orchestrator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace the operator watches: empty means all namespaces (watchAllNamespaces). */}}
{{- define "media-orchestrator.watchNamespace" -}}
{{- if not .Values.watchAllNamespaces }}
{{- default .Release.Namespace .Values.watchNamespace }}
{{- end }}
{{- end }}

{{/* Where the chart's GpuEndpoints go: the watched namespace, else the release namespace. */}}
{{- define "media-orchestrator.endpointsNamespace" -}}
{{- default .Release.Namespace (include "media-orchestrator.watchNamespace" .) }}
{{- end }}

{{/*
One leader per watched scope: the Lease is named after what is watched, not after the release,
and lives where every release watching that scope looks for it: the watched namespace, or
leaderElection.clusterNamespace for the whole cluster. Overlapping releases compete for it.
*/}}
{{- define "media-orchestrator.leaderElectionId" -}}
{{- $watch := include "media-orchestrator.watchNamespace" . }}
{{- if $watch }}
{{- printf "media-orchestrator-ns-%s" $watch }}
{{- else }}
{{- print "media-orchestrator-cluster" }}
{{- end }}
{{- end }}

{{- define "media-orchestrator.leaderElectionNamespace" -}}
{{- default .Values.leaderElection.clusterNamespace (include "media-orchestrator.watchNamespace" .) }}
{{- end }}

{{/* registry/repository:tag@digest, the parts given (as cert-manager's chart renders images). */}}
{{- define "media-orchestrator.image" -}}
{{- $img := .Values.image }}
{{- $ref := $img.repository }}
{{- with $img.registry }}{{ $ref = printf "%s/%s" (trimSuffix "/" .) $ref }}{{ end }}
{{- $ref = printf "%s:%s" $ref (default .Chart.AppVersion (toString $img.tag)) }}
{{- with $img.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end }}
{{- $ref }}
{{- end }}

{{/* The Secret the pods read their provider credentials from. */}}
{{- define "media-orchestrator.secretName" -}}
{{- default (include "media-orchestrator.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/*
The Secret holding CALLBACK_SECRET: the chart's own (callback.secret given), yours
(callback.existingSecret), or <fullname>-callback, created once by the hook Job.
*/}}
{{- define "media-orchestrator.callbackSecretName" -}}
{{- if .Values.callback.secret }}
{{- include "media-orchestrator.fullname" . }}
{{- else if .Values.callback.existingSecret }}
{{- .Values.callback.existingSecret }}
{{- else }}
{{- include "media-orchestrator.generatedCallbackSecretName" . }}
{{- end }}
{{- end }}

{{/* Where CALLBACK_SECRET_PREVIOUS is: the chart's Secret (callback.previousSecret), else the callback key's. */}}
{{- define "media-orchestrator.previousCallbackSecretName" -}}
{{- if .Values.callback.previousSecret }}
{{- include "media-orchestrator.fullname" . }}
{{- else }}
{{- include "media-orchestrator.callbackSecretName" . }}
{{- end }}
{{- end }}

{{- define "media-orchestrator.generatedCallbackSecretName" -}}
{{- printf "%s-callback" (include "media-orchestrator.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{/* Whether the hook Job must create the callback Secret. */}}
{{- define "media-orchestrator.generateCallbackSecret" -}}
{{- if and (not .Values.crds.only) (not .Values.callback.secret) (not .Values.callback.existingSecret) }}true{{ end }}
{{- end }}

{{/*
CALLBACK_BASE_URL: the value given, else the Ingress host, else the Service's cluster DNS name
(reachable from inside the cluster only).
*/}}
{{- define "media-orchestrator.callbackBaseUrl" -}}
{{- if .Values.callback.baseUrl }}
{{- .Values.callback.baseUrl | trimSuffix "/" }}
{{- else if .Values.ingress.enabled }}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host }}
{{- else }}
{{- printf "http://%s.%s.svc:%d" (include "media-orchestrator.fullname" .) .Release.Namespace (int .Values.service.port) }}
{{- end }}
{{- end }}

{{/*
Refuses the values with a message naming the value to fix. `helm install`, `upgrade` and
`template` stop at `fail`. `helm lint` does not: its `fail` only logs an [INFO] line and goes on,
so the include after it, of a template that does not exist, is what fails the lint (with the
message in the template's name). What install refuses, lint refuses too.
*/}}
{{- define "media-orchestrator.refuse" -}}
{{- fail . }}
{{- include (printf "refused: %s" .) nil }}
{{- end }}

{{/* The rules JSON schema cannot express; each message names the value to fix. */}}
{{- define "media-orchestrator.validate" -}}
{{- if and .Values.crds.only (not .Values.crds.install) }}
{{- include "media-orchestrator.refuse" "crds.only=true renders only the CRDs: it needs crds.install=true" }}
{{- end }}
{{- if and .Values.watchAllNamespaces .Values.watchNamespace }}
{{- include "media-orchestrator.refuse" (printf "watchNamespace (%q) and watchAllNamespaces=true contradict each other: set one" .Values.watchNamespace) }}
{{- end }}
{{- if and .Values.secrets.existingSecret (or .Values.secrets.gpuProviderApiKey .Values.secrets.paymentProviderApiKey .Values.secrets.paymentProviderWebhookSecret .Values.secrets.webhooksGpuProviderApiKey .Values.callback.secret) }}
{{- include "media-orchestrator.refuse" "secrets.existingSecret is set: the credentials (secrets.gpuProviderApiKey, secrets.paymentProviderApiKey, secrets.paymentProviderWebhookSecret, secrets.webhooksGpuProviderApiKey, callback.secret) must then be keys of that Secret, not values" }}
{{- end }}
{{- if and .Values.secrets.webhooksGpuProviderApiKey .Values.secrets.webhooksGpuProviderApiKeyKey }}
{{- include "media-orchestrator.refuse" "secrets.webhooksGpuProviderApiKey and secrets.webhooksGpuProviderApiKeyKey contradict each other: set one" }}
{{- end }}
{{- if and .Values.callback.secret .Values.callback.existingSecret }}
{{- include "media-orchestrator.refuse" "callback.secret and callback.existingSecret contradict each other: set one" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) }}
{{- include "media-orchestrator.refuse" "ingress.host is required when ingress.enabled=true" }}
{{- end }}
{{- /* values.schema.json refuses these too, before any template runs. */}}
{{- if and .Values.ingress.enabled (not .Values.webhooks.trustedProxies) }}
{{- include "media-orchestrator.refuse" "webhooks.trustedProxies is required when ingress.enabled=true: set it to the addresses (CIDRs) of the ingress controller's pods, or every sender shares the ingress controller's address and one sender's failures are charged to all" }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.egress.apiServer.cidrs) }}
{{- include "media-orchestrator.refuse" "networkPolicy.egress.apiServer.cidrs is required when networkPolicy.enabled=true: a rule without addresses allows every address (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes lists the API server's)" }}
{{- end }}
{{- if and (not .Values.crds.only) (has .Values.environment (list "prod" "production")) (not .Values.image.digest) }}
{{- include "media-orchestrator.refuse" (printf "image.digest is required with environment=%s: a tag can be moved, a digest cannot" .Values.environment) }}
{{- end }}
{{- if and (not .Values.crds.only) (ne .Values.environment "dev") }}
{{- $url := include "media-orchestrator.callbackBaseUrl" . }}
{{- if not (hasPrefix "https://" $url) }}
{{- include "media-orchestrator.refuse" (printf "the callback URL %s is plain HTTP, and the per-job callback URLs carry tokens: outside environment=dev set callback.baseUrl to an https:// URL, or enable ingress.tls.enabled with the Ingress" $url) }}
{{- end }}
{{- end }}
{{- $le := .Values.leaderElection }}
{{- if and (not $le.enabled) (gt (int .Values.replicaCount) 1) }}
{{- include "media-orchestrator.refuse" (printf "leaderElection.enabled=false with replicaCount=%d: every replica would reconcile the same jobs" (int .Values.replicaCount)) }}
{{- end }}
{{- if le (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds) }}
{{- include "media-orchestrator.refuse" (printf "leaderElection.leaseDurationSeconds (%d) must be greater than leaderElection.renewDeadlineSeconds (%d), or a follower could take over while the leader still reconciles" (int $le.leaseDurationSeconds) (int $le.renewDeadlineSeconds)) }}
{{- end }}
{{- if le (int $le.renewDeadlineSeconds) (int $le.retryPeriodSeconds) }}
{{- include "media-orchestrator.refuse" (printf "leaderElection.renewDeadlineSeconds (%d) must be greater than leaderElection.retryPeriodSeconds (%d), or the leader gets no second try to renew" (int $le.renewDeadlineSeconds) (int $le.retryPeriodSeconds)) }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (gt (int .Values.replicaCount) 1) (eq (toString $pdb.maxUnavailable) "") (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .Values.replicaCount)) }}
{{- include "media-orchestrator.refuse" (printf "podDisruptionBudget.minAvailable (%d) must be less than replicaCount (%d), or no node could ever be drained" (int $pdb.minAvailable) (int .Values.replicaCount)) }}
{{- end }}
{{- range $w := list "asr" "tts" "render" }}
{{- $ep := index $.Values.gpuEndpoints $w }}
{{- if lt (int $ep.maxWorkers) (int $ep.minWorkers) }}
{{- include "media-orchestrator.refuse" (printf "gpuEndpoints.%s.maxWorkers (%d) must be at least gpuEndpoints.%s.minWorkers (%d)" $w (int $ep.maxWorkers) $w (int $ep.minWorkers)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Environment of both containers: the product's configuration (src/config/env.ts). */}}
{{- define "media-orchestrator.env" -}}
- name: MEDIA_ENV
  value: {{ .Values.environment | quote }}
- name: MEDIA_ENDPOINT_PREFIX
  value: {{ .Values.endpointPrefix | quote }}
- name: GPU_PROVIDER_API_URL
  value: {{ .Values.gpuProvider.apiUrl | quote }}
{{- with .Values.gpuProvider.managementUrl }}
- name: GPU_PROVIDER_MANAGEMENT_URL
  value: {{ . | quote }}
{{- end }}
{{- range $w := list "asr" "tts" "render" }}
{{- with index $.Values.gpuProvider.endpoints $w }}
- name: GPU_PROVIDER_ENDPOINT_{{ upper $w }}
  value: {{ . | quote }}
{{- end }}
{{- end }}
- name: PAYMENT_PROVIDER_API_URL
  value: {{ .Values.paymentProvider.apiUrl | quote }}
- name: USAGE_METERING
  value: {{ .Values.usage.metering | quote }}
- name: TENANCY_REQUIRE_ACCOUNT
  value: {{ include "media-orchestrator.requireAccount" . | quote }}
- name: USAGE_BILLED_TIME
  value: {{ .Values.usage.billedTime | quote }}
{{- if and (eq .Values.usage.billedTime "executionAndDelay") (not .Values.usage.queueWaitBillingAcknowledged) }}
{{- fail "usage.billedTime executionAndDelay bills queue wait, which is not the provider's cost and depends on other customers' traffic: set usage.queueWaitBillingAcknowledged=true to bill it anyway" }}
{{- end }}
- name: USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED
  value: {{ .Values.usage.queueWaitBillingAcknowledged | quote }}
- name: USAGE_MINIMUM_SECONDS
  value: {{ .Values.usage.minimumSeconds | quote }}
- name: USAGE_BILL_FAILED
  value: {{ .Values.usage.billFailed | quote }}
- name: USAGE_METER_EVENT_NAME
  value: {{ .Values.usage.meterEventName | quote }}
{{- with .Values.usage.workerCostMeterEventName }}
- name: USAGE_WORKER_COST_METER_EVENT_NAME
  value: {{ . | quote }}
{{- end }}
{{- with .Values.usage.meterEventNames }}
- name: USAGE_METER_EVENT_NAMES
  value: {{ include "media-orchestrator.meterEventNames" . | quote }}
{{- end }}
- name: USAGE_REPORT_INTERVAL_SECONDS
  value: {{ .Values.usage.reportIntervalSeconds | quote }}
{{- with .Values.cost.pricePerSecondMicros }}
- name: COST_PRICE_PER_SECOND_MICROS
  value: {{ . | quote }}
{{- end }}
- name: USAGE_INVOICE_GRACE_SECONDS
  value: {{ .Values.usage.invoiceGraceSeconds | quote }}
- name: CALLBACK_BASE_URL
  value: {{ include "media-orchestrator.callbackBaseUrl" . | quote }}
- name: RESYNC_INTERVAL_SECONDS
  value: {{ .Values.resyncIntervalSeconds | quote }}
- name: PROVIDER_DRIFT_CHECK_SECONDS
  value: {{ .Values.providerDriftCheckSeconds | quote }}
- name: JOB_TIMEOUT_SECONDS
  value: {{ .Values.jobTimeoutSeconds | quote }}
- name: JOB_START_DEADLINE_SECONDS
  value: {{ .Values.startDeadlineSeconds | quote }}
- name: UNCONFIRMED_SUBMISSION_POLICY
  value: {{ .Values.unconfirmedSubmissionPolicy | quote }}
- name: MEDIA_PLANS
  value: {{ .Values.plans | default dict | toJson | quote }}
- name: CANCEL_FOLLOW_WARNING_SECONDS
  value: {{ .Values.cancelFollowWarningSeconds | quote }}
- name: DELETE_USAGE_TIMEOUT_SECONDS
  value: {{ .Values.deleteUsageTimeoutSeconds | quote }}
- name: MAX_CONCURRENT_RECONCILES
  value: {{ .Values.maxConcurrentReconciles | quote }}
- name: FAIR_SHARE_WINDOW
  value: {{ .Values.fairShare.window | quote }}
- name: FAIR_SHARE_JOB_SECONDS
  value: {{ .Values.fairShare.jobSeconds | quote }}
{{- with .Values.fairShare.weights }}
- name: FAIR_SHARE_WEIGHTS
  value: {{ include "media-orchestrator.fairShareWeights" . | quote }}
{{- end }}
- name: WATCH_NAMESPACE
  value: {{ include "media-orchestrator.watchNamespace" . | quote }}
- name: LEADER_ELECTION
  value: {{ .Values.leaderElection.enabled | quote }}
- name: LEADER_ELECTION_NAMESPACE
  value: {{ include "media-orchestrator.leaderElectionNamespace" . | quote }}
- name: LEADER_ELECTION_ID
  value: {{ include "media-orchestrator.leaderElectionId" . | quote }}
- name: LEADER_ELECTION_LEASE_DURATION_SECONDS
  value: {{ .Values.leaderElection.leaseDurationSeconds | quote }}
- name: LEADER_ELECTION_RENEW_DEADLINE_SECONDS
  value: {{ .Values.leaderElection.renewDeadlineSeconds | quote }}
- name: LEADER_ELECTION_RETRY_PERIOD_SECONDS
  value: {{ .Values.leaderElection.retryPeriodSeconds | quote }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
# The sidecar's namespace for PaymentEvents and BillingAccounts when no WATCH_NAMESPACE is set.
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: WEBHOOKS_PORT
  value: {{ .Values.service.port | quote }}
- name: CONTROLLER_METRICS_PORT
  value: {{ .Values.service.metricsPort | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- with .Values.webhooks.trustedProxies }}
- name: WEBHOOKS_TRUSTED_PROXIES
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.storage }}
{{- if .bucket }}
- name: STORAGE_BUCKET
  value: {{ .bucket | quote }}
{{- with .endpoint }}
- name: STORAGE_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: STORAGE_REGION
  value: {{ .region | quote }}
{{- with .addressing }}
- name: STORAGE_ADDRESSING
  value: {{ . | quote }}
{{- end }}
- name: STORAGE_CREDENTIALS
  value: {{ .credentials | quote }}
- name: STORAGE_SWEEP_INTERVAL_SECONDS
  value: {{ .sweepIntervalSeconds | quote }}
- name: STORAGE_ORPHAN_MIN_AGE_SECONDS
  value: {{ .orphanMinAgeSeconds | quote }}
- name: STORAGE_CACHE_TTL_SECONDS
  value: {{ .cacheTtlSeconds | quote }}
{{- with .keep }}
{{- with .allowedHosts }}
- name: STORAGE_KEEP_ALLOWED_HOSTS
  value: {{ join "," . | quote }}
{{- end }}
- name: STORAGE_KEEP_MAX_BYTES
  value: {{ .maxBytes | int64 | quote }}
- name: STORAGE_KEEP_TIMEOUT_SECONDS
  value: {{ .timeoutSeconds | quote }}
{{- end }}
{{- end }}
{{- end }}
# The credentials are files in this directory, each container's own (secretsVolume below).
- name: SECRETS_DIR
  value: {{ include "media-orchestrator.secretsDir" . | quote }}
{{- end }}

{{/* usage.meterEventNames as USAGE_METER_EVENT_NAMES: workload=event_name, comma-separated, sorted. */}}
{{- define "media-orchestrator.meterEventNames" -}}
{{- $out := list }}
{{- range $w, $name := . }}
{{- $out = append $out (printf "%s=%s" $w $name) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{- define "media-orchestrator.secretsDir" -}}
/var/run/secrets/media-orchestrator
{{- end }}

{{/* The key of the credentials Secret the sidecar reads as its GPU key. */}}
{{- define "media-orchestrator.webhooksGpuKey" -}}
{{- if and (not .Values.secrets.existingSecret) .Values.secrets.webhooksGpuProviderApiKey }}
{{- print "WEBHOOKS_GPU_PROVIDER_API_KEY" }}
{{- else }}
{{- default "GPU_PROVIDER_API_KEY" .Values.secrets.webhooksGpuProviderApiKeyKey }}
{{- end }}
{{- end }}

{{/*
The Secret keys each container sees, as files named after the variables they supply
(src/config/secret-files.ts): the controller sees the payment API key only with usage.metering
(to send meter events), never the webhook signing secret; the sidecar
gets its own (restricted) GPU key when one is given. A projected volume, not subPath mounts:
the kubelet updates it when the Secret changes, and the processes re-read it.
*/}}
{{- define "media-orchestrator.secretsVolume" -}}
{{- $ := .root }}
{{- $main := list (dict "key" "GPU_PROVIDER_API_KEY" "path" "GPU_PROVIDER_API_KEY") }}
{{- /* The controller reports usage to the payment provider's meters only with usage.metering. */}}
{{- if and (ne .name "webhooks") $.Values.usage.metering }}
{{- $main = append $main (dict "key" "PAYMENT_PROVIDER_API_KEY" "path" "PAYMENT_PROVIDER_API_KEY") }}
{{- end }}
{{- /* The store's keys: the controller's alone (the sidecar never touches the store). */}}
{{- if and (ne .name "webhooks") $.Values.storage.bucket (eq $.Values.storage.credentials "keys") }}
{{- $main = concat $main (list (dict "key" "STORAGE_ACCESS_KEY_ID" "path" "STORAGE_ACCESS_KEY_ID") (dict "key" "STORAGE_SECRET_ACCESS_KEY" "path" "STORAGE_SECRET_ACCESS_KEY")) }}
{{- end }}
{{- if eq .name "webhooks" }}
{{- $main = list (dict "key" (include "media-orchestrator.webhooksGpuKey" $) "path" "GPU_PROVIDER_API_KEY") (dict "key" "PAYMENT_PROVIDER_API_KEY" "path" "PAYMENT_PROVIDER_API_KEY") (dict "key" "PAYMENT_PROVIDER_WEBHOOK_SECRET" "path" "PAYMENT_PROVIDER_WEBHOOK_SECRET") }}
{{- end -}}
name: {{ .name }}-secrets
projected:
  # 0444: the files belong to root and the process runs as another user.
  defaultMode: 292
  sources:
    # Optional, as each key is: a key the Secret lacks is no file.
    - secret:
        name: {{ include "media-orchestrator.secretName" $ }}
        optional: true
        items:
          {{- toYaml $main | nindent 10 }}
    - secret:
        name: {{ include "media-orchestrator.callbackSecretName" $ }}
        items:
          - key: CALLBACK_SECRET
            path: CALLBACK_SECRET
    # The key before a rotation, while it is kept (src/callback/token.ts accepts both).
    - secret:
        name: {{ include "media-orchestrator.previousCallbackSecretName" $ }}
        optional: true
        items:
          - key: CALLBACK_SECRET_PREVIOUS
            path: CALLBACK_SECRET_PREVIOUS
{{- end }}

{{/*
The containers' environment: the chart's variables, each replaced by an extraEnv entry of the same
name, then the other extraEnv entries (a variable twice would leave which one wins to the reader).
*/}}
{{- define "media-orchestrator.containerEnv" -}}
{{- $extra := dict }}
{{- range .Values.extraEnv }}{{ $_ := set $extra .name . }}{{ end }}
{{- $out := list }}
{{- range (include "media-orchestrator.env" . | fromYamlArray) }}
{{- $out = append $out (get $extra .name | default .) }}
{{- end }}
{{- $base := include "media-orchestrator.env" . | fromYamlArray }}
{{- range .Values.extraEnv }}
{{- $name := .name }}
{{- $known := false }}
{{- range $base }}{{ if eq .name $name }}{{ $known = true }}{{ end }}{{ end }}
{{- if not $known }}{{ $out = append $out . }}{{ end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* A probe of one container: the fixed route and port, the timings from values. */}}
{{- define "media-orchestrator.probe" -}}
{{- $probe := dict "httpGet" (dict "path" .path "port" .port) }}
{{- toYaml (merge $probe .timings) }}
{{- end }}

{{/*
The rules of the watched namespace (or of every namespace with watchAllNamespaces): one line per
need, see docs/helm.md. c = controller (src/controller), w = webhooks sidecar (src/webhooks).
With webhooks.separateDeployment each process's ServiceAccount gets only its own rules
(controllerRules, webhooksRules); otherwise the pod's one ServiceAccount gets both (rules).
*/}}
{{- define "media-orchestrator.rules" -}}
# c: informer (list, watch), next pipeline step (create, get), finalizer (merge patch)
# w: a callback reads its job (get); before adopting a provider job it lists the jobs holding it
#    (list, by the field status.providerJobId)
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs"]
  verbs: ["get", "list", "watch", "create", "patch"]
# c: every status write is a PUT with the resourceVersion read; w: callbacks write status
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs/status"]
  verbs: ["update"]
# c: informer
- apiGroups: ["media-orchestrator.io"]
  resources: ["gpuendpoints"]
  verbs: ["list", "watch"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["gpuendpoints/status"]
  verbs: ["update"]
# c: informer (admission of jobs), the usage reporter (get, then status update: period usage);
# w: subscription events (get, create, status update)
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts"]
  verbs: ["get", "list", "watch", "create"]
# c: the plan's limit on the account (status.usage.limitSeconds); w: the subscription state
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts/status"]
  verbs: ["update"]
# w: the record (create), replays (get; watch keeps each replica's memory of finished events),
#    garbage collection of old records (list, delete)
- apiGroups: ["media-orchestrator.io"]
  resources: ["paymentevents"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["paymentevents/status"]
  verbs: ["update"]
# c, w: Kubernetes Events on the objects (src/k8s/events.ts: events.k8s.io/v1, created, then
#    patched to count a series of the same Event, as client-go's events recorder does; the sidecar
#    records AdoptedByCallback)
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "media-orchestrator.controllerRules" -}}
# informer (list, watch), next pipeline step (create, get), finalizer (merge patch)
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs"]
  verbs: ["get", "list", "watch", "create", "patch"]
# every status write is a PUT with the resourceVersion read
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs/status"]
  verbs: ["update"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["gpuendpoints"]
  verbs: ["list", "watch"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["gpuendpoints/status"]
  verbs: ["update"]
# informer: admission reads the accounts the sidecar writes; the usage reporter reads one (get)
# and writes its period usage (status update)
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts"]
  verbs: ["get", "list", "watch"]
# the account's period usage (the usage reporter) and its plan's limit (status.usage)
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts/status"]
  verbs: ["update"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "media-orchestrator.webhooksRules" -}}
# a callback reads its job and writes its result (GET, then PUT of the status); before adopting a
# provider job it lists the jobs holding it (list, by the field status.providerJobId)
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs"]
  verbs: ["get", "list"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["mediajobs/status"]
  verbs: ["update"]
# subscription events
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts"]
  verbs: ["get", "create"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["billingaccounts/status"]
  verbs: ["update"]
# the record (create), replays (get; watch), readiness and garbage collection (list, delete)
- apiGroups: ["media-orchestrator.io"]
  resources: ["paymentevents"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["media-orchestrator.io"]
  resources: ["paymentevents/status"]
  verbs: ["update"]
# a result adopted by a callback without a recorded /run answer is a Warning Event on the job
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* The pods of a component: the release's selector labels, plus the component when separate. */}}
{{- define "media-orchestrator.componentSelectorLabels" -}}
{{ include "media-orchestrator.selectorLabels" .root }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* The sidecar's ServiceAccount with webhooks.separateDeployment. */}}
{{- define "media-orchestrator.webhooksServiceAccountName" -}}
{{- printf "%s-webhooks" (include "media-orchestrator.serviceAccountName" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{/*
The sidecar's V8 old-space bound in MiB: 40 % of its container's memory limit (a Kubernetes
quantity: plain bytes or a k, M, G, T, Ki, Mi, Gi, Ti suffix). Without it V8 sizes its heap from
the node's memory, not the container's, and lets garbage pile up far past the limit before it
collects: under a stream of bad requests the sidecar grew from 190 to 320 MiB of a 256 MiB limit
with its live heap flat at 55 MiB. The rest of the limit is for what is not old space: the young
generation (--max-semi-space-size), code, buffers. docs/webhooks.md, "Memory".
*/}}
{{- define "media-orchestrator.oldSpaceMiB" -}}
{{- $q := toString . }}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) }}
{{- fail (printf "resources.webhooks.limits.memory: %q is not a size the chart can bound the sidecar's heap from: write a whole number of Mi or Gi (1536Mi, not 1.5Gi)" $q) }}
{{- end }}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 }}
{{- $bytes := mul (regexFind "^[0-9]+" $q | int64) (get $units (regexReplaceAll "^[0-9]+" $q "")) }}
{{- div (mul $bytes 40) (mul 100 1048576) }}
{{- end }}

{{/* One container of the pod, after its name and args: both run the same image and configuration. */}}
{{- define "media-orchestrator.container" -}}
{{- $ := .root }}
{{- $probes := index $.Values.probes .name -}}
{{- $env := include "media-orchestrator.containerEnv" $ | fromYamlArray }}
{{- if and (eq .name "webhooks") $.Values.webhooks.separateDeployment }}
{{- /* Its own pod: no controller beside it whose Lease could pick the one replica that collects old PaymentEvents, so every replica collects (src/webhooks/gc.ts: harmless). */}}
{{- $env = without $env (dict "name" "LEADER_ELECTION" "value" (toString $.Values.leaderElection.enabled)) }}
{{- $env = append $env (dict "name" "LEADER_ELECTION" "value" "false") }}
{{- end -}}
{{- $limit := (((index $.Values.resources .name) | default dict).limits | default dict).memory }}
{{- $ownNodeOptions := false }}
{{- range $env }}{{ if eq .name "NODE_OPTIONS" }}{{ $ownNodeOptions = true }}{{ end }}{{ end }}
{{- if and (eq .name "webhooks") $limit (not $ownNodeOptions) }}
{{- /* The internet-facing sidecar's heap is bounded by its container's limit (oldSpaceMiB); extraEnv's NODE_OPTIONS replaces this. */}}
{{- $env = append $env (dict "name" "NODE_OPTIONS" "value" (printf "--max-old-space-size=%s" (include "media-orchestrator.oldSpaceMiB" $limit))) }}
{{- end -}}
image: {{ include "media-orchestrator.image" $ }}
imagePullPolicy: {{ $.Values.image.pullPolicy }}
env:
  {{- toYaml $env | nindent 2 }}
ports:
  - name: {{ .port }}
    containerPort: {{ .number }}
    protocol: TCP
startupProbe:
  {{- include "media-orchestrator.probe" (dict "path" "/healthz" "port" .port "timings" $probes.startup) | nindent 2 }}
livenessProbe:
  {{- include "media-orchestrator.probe" (dict "path" "/healthz" "port" .port "timings" $probes.liveness) | nindent 2 }}
readinessProbe:
  {{- include "media-orchestrator.probe" (dict "path" "/readyz" "port" .port "timings" $probes.readiness) | nindent 2 }}
resources:
  {{- toYaml (index $.Values.resources .name) | nindent 2 }}
{{- with $.Values.containerSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  - name: {{ .name }}-secrets
    mountPath: {{ include "media-orchestrator.secretsDir" $ }}
    readOnly: true
{{- end }}

{{/* NetworkPolicy egress rules shared by the chart's policies. */}}
{{- define "media-orchestrator.dnsEgress" -}}
{{- $dns := .Values.networkPolicy.egress.dns -}}
- to:
    - {{- toYaml (omit $dns "ports") | nindent 6 }}
  ports:
    {{- range $dns.ports }}
    - port: {{ . }}
      protocol: UDP
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end }}

{{/* The API server's addresses (required with the policies: a rule without them allows every address). */}}
{{- define "media-orchestrator.apiServerEgress" -}}
{{- $api := .Values.networkPolicy.egress.apiServer -}}
- to:
    {{- range (required "networkPolicy.egress.apiServer.cidrs is required when networkPolicy.enabled=true" $api.cidrs) }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  ports:
    {{- range $api.ports }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end }}

{{/* fairShare.weights (account: weight) as FAIR_SHARE_WEIGHTS: account=weight,... */}}
{{- define "media-orchestrator.fairShareWeights" -}}
{{- $parts := list -}}
{{- range $account, $weight := . -}}
{{- $parts = append $parts (printf "%s=%v" $account $weight) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/*
Tenancy (docs/design.md, "Tenancy"). Every job bills an account when plans or metering are on,
unless tenancy.requireAccount says otherwise.
*/}}
{{- define "media-orchestrator.requireAccount" -}}
{{- if kindIs "bool" .Values.tenancy.requireAccount }}
{{- .Values.tenancy.requireAccount }}
{{- else }}
{{- or (gt (len (.Values.plans | default dict)) 0) .Values.usage.metering }}
{{- end }}
{{- end }}

{{- define "media-orchestrator.operatorPolicyName" -}}
{{- printf "%s-operator-only" (include "media-orchestrator.clusterName" . | trunc 49 | trimSuffix "-") }}
{{- end }}

{{/* The operators' groups, as a CEL list literal (JSON). */}}
{{- define "media-orchestrator.operatorGroups" -}}
{{- .Values.tenancy.operatorGroups | default list | toJson }}
{{- end }}

{{/* The operators' users: the release's own ServiceAccounts always, then tenancy.operatorUsers. */}}
{{- define "media-orchestrator.operatorUsers" -}}
{{- $users := list (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "media-orchestrator.serviceAccountName" .)) }}
{{- if .Values.webhooks.separateDeployment }}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "media-orchestrator.webhooksServiceAccountName" .)) }}
{{- end }}
{{- concat $users (.Values.tenancy.operatorUsers | default list) | toJson }}
{{- end }}
