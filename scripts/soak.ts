// `npm run soak -- --minutes N [--seed S] [--namespaces K] [--cluster NAME] [--keep] [--faults a,b] [--no-health-gates] [--no-profile-drains] [--no-csi]`:
// the chaos soak (test/chaos/soak.ts) against the local cluster: reuses a
// running one (the test run's, else `--cluster`'s, default "default"), or
// starts one for the run and stops it afterwards. Prints the report (also
// written to test-artifacts/soak/<id>/report.json); exit 1 on any violation.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { reuseOrStartCluster } from '../test/cluster/reuse.ts';
import { testCluster } from '../test/cluster/testing.ts';
import { FAULT_KINDS } from '../test/chaos/faults.ts';
import { runSoak, summarize } from '../test/chaos/soak.ts';

const root = join(import.meta.dirname, '..');

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '10' },
      seed: { type: 'string' },
      namespaces: { type: 'string', default: '3' },
      cluster: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'no-faults': { type: 'boolean', default: false },
      'no-health-gates': { type: 'boolean', default: false },
      'no-profile-drains': { type: 'boolean', default: false },
      'no-csi': { type: 'boolean', default: false },
      faults: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(
      `usage: npm run soak -- --minutes N [--seed S] [--namespaces K] [--cluster NAME] [--keep] [--no-faults] [--no-health-gates] [--no-profile-drains] [--no-csi] [--faults KIND,...]\nfault kinds: ${FAULT_KINDS.join(', ')}`,
    );
    return 0;
  }
  const minutes = Number(values.minutes);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  const namespaces = Number(values.namespaces);
  const only = values.faults?.split(',').filter(Boolean);
  const unknown = only?.filter((k) => !(FAULT_KINDS as string[]).includes(k)) ?? [];
  if (unknown.length > 0) {
    console.error(`unknown fault kind(s): ${unknown.join(', ')}; known: ${FAULT_KINDS.join(', ')}`);
    return 2;
  }
  const faultWeights = only ? Object.fromEntries(FAULT_KINDS.map((k) => [k, only.includes(k) ? 1 : 0])) : undefined;
  if (!(minutes > 0) || !Number.isInteger(seed) || !Number.isInteger(namespaces) || namespaces < 1) {
    console.error('--minutes must be > 0, --seed an integer, --namespaces a positive integer');
    return 2;
  }

  const name = values.cluster ?? 'default';
  const owned = await reuseOrStartCluster(name, { name: name === 'default' ? 'soak' : name });
  const stop = () => void owned?.teardown().then(() => process.exit(130));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    const cluster = testCluster();
    const runDir = join(
      root,
      'test-artifacts',
      'soak',
      `seed-${seed}-${new Date().toISOString().replace(/[:.]/g, '-')}`,
    );
    const report = await runSoak({
      cluster,
      minutes,
      seed,
      namespaces,
      runDir,
      keep: values.keep,
      faults: !values['no-faults'],
      healthGates: !values['no-health-gates'],
      profileDrains: !values['no-profile-drains'],
      csiRotations: !values['no-csi'],
      ...(faultWeights ? { faultWeights } : {}),
      log: (line) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`),
    });
    console.log(summarize(report));
    console.log(`report: ${join(runDir, 'report.json')}`);
    return report.violations.length > 0 ? 1 : 0;
  } finally {
    await owned?.teardown();
  }
}

process.exitCode = await main();
process.exit();
