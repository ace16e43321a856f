// Child process of the webhooks benchmark: serves /admission/no-downscale over
// HTTPS on 127.0.0.1 with a fresh self-signed certificate, so its CPU can be
// measured apart from the load generator. Protocol, one JSON line each way:
//   stdout  {"port": N, "ca": PEM}               once listening
//   stdin   start  → stdout {"started": true}    CPU and call counts reset
//   stdin   stop   → stdout {"cpuUserUs", "cpuSystemUs", "elapsedMs", "getParentLabelsCalls"}, then exits
import { createInterface } from 'node:readline';
import { Registry } from 'prom-client';
import { noDownscaleHandler } from '../src/webhooks/nodownscale.ts';
import { WebhookServer } from '../src/runtime/admission/webhookserver.ts';
import { generateSelfSigned } from '../src/webhooks/tls/generate.ts';

const tls = await generateSelfSigned({
  org: 'stateward-bench',
  dnsNames: ['localhost'],
  validityMs: 3_600_000,
  now: Date.now(),
});
// "API calls made on the typed-object path": the handler may only GET the
// parent for a Scale; a StatefulSet UPDATE carries its labels in oldObject.
let getParentLabelsCalls = 0;
const server = new WebhookServer({
  port: 0,
  host: '127.0.0.1',
  requestTimeoutMs: 10_000,
  registry: new Registry(),
  tls,
});
server.handle(
  '/admission/no-downscale',
  noDownscaleHandler({
    getParentLabels: () => {
      getParentLabelsCalls++;
      return Promise.resolve(undefined);
    },
  }),
);
const port = await server.listen();
console.log(JSON.stringify({ port, ca: tls.ca }));

let cpuStart = process.cpuUsage();
let wallStart = performance.now();
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'start') {
    getParentLabelsCalls = 0;
    cpuStart = process.cpuUsage();
    wallStart = performance.now();
    console.log(JSON.stringify({ started: true }));
  } else if (line === 'stop') {
    const cpu = process.cpuUsage(cpuStart);
    const elapsedMs = performance.now() - wallStart;
    console.log(JSON.stringify({ cpuUserUs: cpu.user, cpuSystemUs: cpu.system, elapsedMs, getParentLabelsCalls }));
    break;
  }
}
await server.close(1_000);
process.exit(0);
