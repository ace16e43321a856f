// docs/getting-started.md's first rollout group and its checks, run as the
// guide writes them (issue 39: "the guide's commands as written"): its
// first-group.yaml (zone a as printed, b and c made as its comment says), its
// shell block line by line, then `npx stateward status` and `doctor`, against
// the test cluster with the operator running from this checkout. Two things
// differ, and only those: the namespace (a fresh one instead of `stateward`)
// and the `get pods … -w` line, which watches until Ctrl-C and is not run.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';

const exec = promisify(execFile);
const cluster = testCluster();
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GUIDE = join(ROOT, 'docs/getting-started.md');

/** The fenced blocks of a section (from its heading to the next heading of any level), with their language. */
function blocksOf(markdown: string, heading: string): { lang: string; body: string }[] {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `the guide has no section ${heading}`);
  const blocks: { lang: string; body: string }[] = [];
  let open: { lang: string; lines: string[] } | undefined;
  for (const line of markdown.slice(start + heading.length + 2).split('\n')) {
    const fence = /^```(\w*)$/.exec(line);
    if (open && fence) {
      blocks.push({ lang: open.lang, body: `${open.lines.join('\n')}\n` });
      open = undefined;
    } else if (open) open.lines.push(line);
    else if (fence) open = { lang: fence[1]!, lines: [] };
    // A heading outside a block ends the section (a YAML comment inside one is no heading).
    else if (/^#{1,6} /.test(line)) break;
  }
  return blocks;
}

/** The commands of a shell block: one per line, comments (whole-line and trailing) removed. */
const commandsOf = (sh: string) =>
  sh
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

describe('getting started, as written', { timeout: 240_000 }, () => {
  it('rolls the first group with the guide’s commands, then status and doctor show it', async (t) => {
    const guide = await readFile(GUIDE, 'utf8');
    const [yaml, sh, ...others] = blocksOf(guide, '### A first rollout group');
    assert.equal(others.length, 0);
    assert.equal(yaml?.lang, 'yaml');
    assert.equal(sh?.lang, 'sh');
    assert.match(yaml.body, /^# first-group\.yaml: three zones/);
    assert.match(yaml.body, /^# repeat as demo-zone-b and demo-zone-c$/m, 'the guide says how to make zones b and c');
    const zoneA = yaml.body;
    const manifest = ['a', 'b', 'c'].map((z) => zoneA.replaceAll('demo-zone-a', `demo-zone-${z}`)).join('---\n');

    const namespace = await cluster.namespace(t, 'guide');
    const dir = await mkdtemp(join(tmpdir(), 'getting-started-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'first-group.yaml'), manifest);
    const op = await OperatorProcess.start(cluster, namespace, ['-reconcile.interval=1s']);
    t.after(() => op.stop());
    await op.waitReady();

    // The project's Node 24 first on PATH, as `npm ci` users have it through npx; kubectl the machine's.
    const env = {
      ...process.env,
      PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`,
      KUBECONFIG: cluster.kubeconfigPath,
      npm_config_offline: 'true',
    };
    const run = async (command: string, cwd = dir) => {
      const line = command.replaceAll('-n stateward', `-n ${namespace}`);
      const result = await exec('bash', ['-o', 'pipefail', '-c', line], { cwd, env }).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
      );
      t.diagnostic(`$ ${line}\n${result.out}`);
      return result;
    };

    const commands = commandsOf(sh.body);
    const watching = commands.filter((c) => / -w$/.test(c));
    assert.deepEqual(watching, ['kubectl -n stateward get pods -L controller-revision-hash -w']);
    const [apply, roll, statusCm, events, ...more] = commands.filter((c) => !watching.includes(c));
    assert.deepEqual(more, []);
    assert.equal((await run(apply!)).code, 0);
    // The group settles first (the StatefulSet controller's status for each zone), as a user would wait.
    await waitFor(
      'the group complete before the change',
      async () => /"phase":"complete"/.test((await run(statusCm!)).out),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const rolledAt = Date.now();
    assert.equal((await run(roll!)).code, 0);
    // "The status ConfigMap reports phase: complete when the group is done": the guide's own command, until it
    // does for this roll (the report before it said complete too), every zone finished after the roll began.
    const done = await waitFor(
      'the guide’s status command saying complete after the roll',
      async () => {
        const { out } = await run(statusCm!);
        const status = JSON.parse(out.trim() || '{}') as {
          phase?: string;
          timeline?: { finishedAt?: string; zones?: { finishedAt?: string }[] };
        };
        const zones = status.timeline?.zones ?? [];
        const rolled =
          zones.length === 3 && zones.every((z) => z.finishedAt !== undefined && Date.parse(z.finishedAt) >= rolledAt);
        return status.phase === 'complete' && status.timeline?.finishedAt && rolled ? status : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    assert.equal(done.phase, 'complete');
    // "DeletingPod (the first pod, then the rest), RolloutComplete"
    await waitFor(
      'the Events the guide names',
      async () => {
        const { code, out } = await run(events!);
        return code === 0 && /DeletingPod/.test(out) && /RolloutComplete/.test(out);
      },
      { timeoutMs: 30_000, intervalMs: 1000 },
    );

    // Check it: the two commands from a clone, in the clone.
    const [check, ...rest] = blocksOf(guide, '### Check it: `stateward status` and `stateward doctor`');
    assert.deepEqual(rest, [], 'one shell block');
    const [statusCmd, doctorCmd, ...extra] = commandsOf(check!.body);
    assert.deepEqual(extra, []);
    const status = await run(statusCmd!, ROOT);
    assert.equal(status.code, 0, status.out);
    assert.match(status.out, /^GROUP demo\s+complete\b/m);
    assert.match(
      status.out,
      /^ {2}last rollout: started \S+, finished \+\d/m,
      'the rollout the guide ran, as a timeline',
    );
    for (const z of ['a', 'b', 'c']) assert.match(status.out, new RegExp(`^ {4}demo-zone-${z}: \\+`, 'm'));
    const diagnosis = await run(doctorCmd!, ROOT);
    assert.equal(diagnosis.code, 0, diagnosis.out);
    assert.doesNotMatch(diagnosis.out, /^ERROR/m);
    assert.match(diagnosis.out, new RegExp(`in namespace ${namespace} \\(checked 3 StatefulSets`));
  });
});
