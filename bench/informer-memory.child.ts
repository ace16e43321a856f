// Child process of the informer benchmark: caches every pod of a namespace
// and reports the heap the cache holds. Run with --expose-gc so the
// measurement is of live objects, not garbage.
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from '../src/runtime/kube/client.ts';
import { resources, type Pod } from '../src/runtime/kube/types.ts';
import { Informer } from '../src/runtime/informer/informer.ts';
import { stripManagedFields } from '../src/runtime/informer/store.ts';

const [kubeconfig, namespace, transform] = process.argv.slice(2);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc || !kubeconfig || !namespace)
  throw new Error('usage: node --expose-gc informer-memory.child.ts KUBECONFIG NAMESPACE on|off');
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const client = new KubeClient({ kubeConfig: kc, timeoutMs: 60_000 });
gc();
const before = process.memoryUsage().heapUsed;
const informer = new Informer<Pod>({
  client,
  type: resources.pods,
  namespace,
  transform: transform === 'on' ? stripManagedFields : (p) => p,
});
const started = performance.now();
informer.start();
await informer.waitForSync();
const syncMs = performance.now() - started;
gc();
gc();
const after = process.memoryUsage();
console.log(
  JSON.stringify({ objects: informer.size, heapBytes: after.heapUsed - before, rssBytes: after.rss, syncMs }),
);
await informer.stop();
await client.close();
