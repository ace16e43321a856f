# syntax=docker/dockerfile:1
# Stateward's container image. The build stage installs the production
# dependencies only and strips the TypeScript sources' types into .js files
# (scripts/build.ts: what Node would do at every start, done once, so the
# process never loads Node's type stripper: ~30 MiB of RSS and a third of the
# time to /ready), then checks the entrypoint starts from that install; the
# runtime stage is distroless, non-root, and writes nothing to its filesystem
# (run it with readOnlyRootFilesystem: true).
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t stateward:dev .
#
# NODE_VERSION is the Node the tests run on (package.json devDependency
# "node"); a test keeps the two equal.
ARG NODE_VERSION=24.21.0

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY scripts/build.ts ./scripts/build.ts
# The version `stateward -version` prints and logs at start: package.json's
# unless a build argument says otherwise.
ARG VERSION=""
RUN if [ -n "$VERSION" ]; then npm pkg set version="$VERSION"; fi \
 && node scripts/build.ts dist \
 && node dist/bin/stateward.js -version

FROM gcr.io/distroless/nodejs24-debian12:nonroot
ARG VERSION=""
LABEL org.opencontainers.image.title="stateward" \
      org.opencontainers.image.description="Keeps stateful workloads safe through rollouts, scaling, drains and config changes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /app
COPY --from=build /app/dist/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/bin ./bin
COPY --from=build /app/dist/src ./src
ENV NODE_ENV=production
# glibc's malloc keeps the freed memory of the many short-lived 16-64 KiB
# buffers a large LIST is read through (TLS records, gzip output) in its heap,
# where later allocations pin it: with 7,000 ConfigMaps and Secrets RSS after
# the sync was 212 MiB, 163 after a forced GC. Served by mmap from 16 KiB up,
# they go back to the system as they are freed: 127 and 112 MiB
# (docs/runtime.md). The benchmarks read these variables from here.
ENV MALLOC_MMAP_THRESHOLD_=16384 MALLOC_TRIM_THRESHOLD_=131072
# 65532: distroless's nonroot user; the manifests run as it too.
USER 65532:65532
EXPOSE 8001 8443
# --max-semi-space-size=4 (MiB): V8's young generation would otherwise grow to
# tens of MiB while the first lists are decoded and keep them; with 7,000
# ConfigMaps and Secrets the process settles at ~95 MiB of RSS instead of
# ~165 (docs/runtime.md). --expose-gc: the runtime gives the heap back once a
# burst of work is over (src/runtime/heaprelease.ts), with V8's
# memory-reducing collection; --no-memory-reducer, since V8's own reducer then
# only wakes every 8 s at idle and, minutes later, runs the same collection
# again for nothing (~30 ms of CPU). --max-opt=2: V8's tiers up to Maglev, not
# TurboFan, whose code pages were ~5 MiB of the RSS of an operator with 30
# pods; the webhooks' p50/p99 under 200 and 500 requests/s and the sync of
# 7,000 configs did not get slower (docs/runtime.md). The benchmarks read
# these flags from here.
ENTRYPOINT ["/nodejs/bin/node", "--max-semi-space-size=4", "--expose-gc", "--no-memory-reducer", "--max-opt=2", "/app/bin/stateward.js"]
