# syntax=docker/dockerfile:1
# media-orchestrator: one image for both containers of the pod (`controller` and `webhooks` are
# arguments of the same entry point). Build: docker build -t media-orchestrator:dev .
# Then, for kind: kind load docker-image media-orchestrator:dev (docs/helm.md).

# Pinned Node base: the Node LTS the Makefile runs every target with (NODE_VERSION there) and
# package.json "engines" names. Pin the digest too in your registry mirror:
# docker buildx imagetools inspect node:24.21.0-bookworm-slim
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# 1. Compile TypeScript with the full dependency set (dev dependencies hold tsc).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

# 2. Production dependencies only, from the same lock file.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts

# 3. The runtime: compiled JavaScript, production node_modules, package.json (ESM "type").
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist/src ./dist/src
COPY --chown=root:root package.json ./
# The files belong to root and are read-only to the process; it runs as the image's non-root
# "node" user, by number so that Kubernetes' runAsNonRoot can verify it. Nothing is written at
# run time (the chart mounts the root file system read-only, with an emptyDir on /tmp).
USER 1000:1000
# 8080: the webhooks sidecar; 8081: the controller's health and metrics.
EXPOSE 8080 8081
# One malloc arena: V8's compiler and collector threads each got an arena of their own, which kept
# 4 to 30 MiB of freed memory resident at random from one start to the next. Fixed mmap and trim
# thresholds: glibc otherwise raises both after the first large free (a list page's body is over
# 1 MiB), and the freed memory then stays resident in the main arena, by 5 to 15 MiB differently at
# each start (docs/benchmarks.md, "Memory and scaling"). At 32 KiB, not 128: blocks of 32 to
# 128 KiB are then mapped and unmapped, not taken from the main arena, where once freed they stayed
# resident between live blocks (only the arena's top is trimmed): the controller idle with 1,000
# jobs cached holds 3 to 5 MiB less, and about the same from one start to the next
# (docs/benchmarks.md, "Runtime flags measured"). bench/lib.ts starts the benchmarked processes
# with the same settings.
ENV MALLOC_ARENA_MAX=1
ENV MALLOC_MMAP_THRESHOLD_=32768
ENV MALLOC_TRIM_THRESHOLD_=32768
# A young generation of at most 2 x 16 MiB: Node 24's default lets it grow to 2 x 64 MiB while the
# controller lists its cache, and it stays resident. --expose-gc: once a burst of work is over,
# the controller asks for the memory-reducing collection V8 would otherwise run only ~100 s later
# (src/runtime/idle-compaction.ts). No --enable-source-maps: with it Node reads and keeps every
# module's source map, 1 to 3 MiB resident for stack traces that then name src/*.ts; without it they
# name dist/*.js (the maps still ship: NODE_OPTIONS=--enable-source-maps turns them on to debug).
# V8's top tier (TurboFan) stays: without it (--max-opt=2) each container held about 5 MiB less,
# but the controller spent 1.8 times the CPU per job at 10,000 jobs and its throughput fell from
# 0.75 to 0.58 of the apiserver's ceiling (docs/benchmarks.md, "Runtime flags measured").
ENTRYPOINT ["node", "--max-semi-space-size=16", "--expose-gc", "dist/src/main.js"]
CMD ["controller"]
