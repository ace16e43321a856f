// Started detached by a real node's owner that exits without teardown
// (realnode.ts, reclaimAfterExit): waits for the owner to be gone, then
// removes what its real node left on this machine.
//
//   node test/cluster/realnode-reclaim.ts <owner pid>
import { processAlive } from './lock.ts';
import { waitFor } from './probe.ts';
import { reclaimRealNode } from './realnode-host.ts';

const owner = Number.parseInt(process.argv[2] ?? '', 10);
const log = (line: string) => console.error(`${new Date().toISOString()} [reclaim] ${line}`);
if (!Number.isInteger(owner)) {
  log('usage: realnode-reclaim.ts <owner pid>');
  process.exit(2);
}
await waitFor(`pid ${owner} to exit`, () => !processAlive(owner), { timeoutMs: 60_000, intervalMs: 100 });
const cleaned = await reclaimRealNode(log, `the real node of pid ${owner}, which exited without teardown`);
log(cleaned ? 'done' : 'another process has taken the real node since; it cleaned up on its start');
