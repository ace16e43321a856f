// `stateward status` without a cluster: flags, kubeconfig handling and what
// it asks the API for, against a small fake API server.
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { runStatus } from '../../src/status/cli.ts';
import { fullInput, NS } from './fixture.ts';

interface Seen {
  path: string;
  query: URLSearchParams;
  accept: string;
}

function capture(env: NodeJS.ProcessEnv = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => out.push(s), err: (s: string) => err.push(s), env, isTTY: false, columns: 100 },
    out: () => out.join(''),
    err: () => err.join(''),
  };
}

/** Answers lists from the fixture; `forbidden` resources get a 403, ZPDBs a 404 when `noCrd`. */
class FakeApi {
  readonly seen: Seen[] = [];
  forbidden = new Set<string>();
  noCrd = false;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    const input = fullInput();
    const byResource: Record<string, unknown[]> = {
      statefulsets: input.statefulSets,
      pods: input.pods,
      zoneawarepoddisruptionbudgets: input.zpdbs,
      leases: input.leases,
      deployments: input.deployments,
      daemonsets: [],
      configmaps: input.configMaps,
      secrets: input.secrets,
      nodes: input.nodes ?? [],
    };
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      this.seen.push({ path: url.pathname, query: url.searchParams, accept: String(req.headers.accept) });
      const segments = url.pathname.split('/').filter(Boolean);
      const resource = segments.at(-1) ?? '';
      const namespace = segments[segments.indexOf('namespaces') + 1];
      const send = (code: number, body: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (this.forbidden.has(resource))
        return send(403, {
          kind: 'Status',
          status: 'Failure',
          reason: 'Forbidden',
          code: 403,
          message: `${resource} is forbidden`,
        });
      if (resource === 'zoneawarepoddisruptionbudgets' && this.noCrd)
        return send(404, {
          kind: 'Status',
          reason: 'NotFound',
          code: 404,
          message: 'the server could not find the requested resource',
        });
      const items = (byResource[resource] ?? []).filter(
        (o) =>
          !segments.includes('namespaces') ||
          (o as { metadata?: { namespace?: string } }).metadata?.namespace === namespace,
      );
      const field = url.searchParams.get('fieldSelector');
      send(200, { kind: 'List', metadata: {}, items: field ? [] : items });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

async function kubeconfig(
  dir: string,
  server: string,
  contexts: { name: string; namespace?: string }[],
  current: string,
): Promise<string> {
  const path = join(dir, `kubeconfig-${current}-${Math.random().toString(36).slice(2)}`);
  await writeFile(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fake', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'me', user: { token: 'x' } }],
      contexts: contexts.map((c) => ({
        name: c.name,
        context: { cluster: 'fake', user: 'me', ...(c.namespace ? { namespace: c.namespace } : {}) },
      })),
      'current-context': current,
    }),
  );
  return path;
}

describe('stateward status command line', () => {
  const api = new FakeApi();
  let dir = '';
  let config = '';
  before(async () => {
    await api.start();
    dir = await mkdtemp(join(tmpdir(), 'stateward-status-'));
    config = await kubeconfig(dir, api.url, [{ name: 'main', namespace: NS }, { name: 'bare' }], 'main');
  });
  after(() => api.stop());

  it('exits 2 on bad flags, naming the flag', async () => {
    for (const argv of [['-o', 'yaml'], ['--nope'], ['-n'], ['-n', 'a', '-A'], ['--interval', '0s'], ['extra']]) {
      const c = capture();
      assert.equal(await runStatus(argv, c.io), 2, argv.join(' '));
      assert.notEqual(c.err(), '');
      assert.equal(c.out(), '');
    }
    const c = capture();
    await runStatus(['-o', 'yaml'], c.io);
    assert.match(c.err(), /invalid value "yaml" for flag -o: must be table or json/);
  });

  it('prints the flags on -help and exits 0', async () => {
    const c = capture();
    assert.equal(await runStatus(['-help'], c.io), 0);
    for (const flag of [
      '-n',
      '-namespace',
      '-A',
      '-all-namespaces',
      '-o',
      '-output',
      '-watch',
      '-interval',
      '-kubeconfig',
      '-context',
    ])
      assert.match(c.err(), new RegExp(`^  ${flag}\\b`, 'm'));
  });

  it('exits 1 with one clear line on a kubeconfig problem', async () => {
    const missing = capture();
    assert.equal(await runStatus(['--kubeconfig', join(dir, 'absent')], missing.io), 1);
    assert.match(missing.err(), /^error: cannot read kubeconfig .*absent: ENOENT\n$/);
    const bad = join(dir, 'bad');
    await writeFile(bad, '{ not yaml: [');
    const invalid = capture();
    assert.equal(await runStatus(['--kubeconfig', bad], invalid.io), 1);
    assert.match(invalid.err(), /^error: .* is not a valid kubeconfig/);
    assert.doesNotMatch(invalid.err(), /\n\s+at /, 'no stack trace');
    const context = capture();
    assert.equal(await runStatus(['--kubeconfig', config, '--context', 'nope'], context.io), 1);
    assert.match(context.err(), /--context=nope: no such context/);
    const none = capture({ HOME: dir });
    assert.equal(await runStatus([], none.io), 1);
    assert.match(none.err(), /no kubeconfig found/);
  });

  it('exits 1 naming the failure when the API server cannot be reached', async () => {
    // A port nothing listens on any more.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = await kubeconfig(dir, `http://127.0.0.1:${port}`, [{ name: 'x' }], 'x');
    const c = capture();
    assert.equal(await runStatus(['--kubeconfig', unreachable], c.io), 1);
    assert.equal(
      c.err(),
      `error: cannot reach the Kubernetes API at http://127.0.0.1:${port}: NetworkError: ECONNREFUSED\n`,
    );
  });

  it("reports the kubeconfig context's namespace, asking only for metadata of ConfigMaps and Secrets", async () => {
    api.seen.length = 0;
    const c = capture({ KUBECONFIG: config });
    assert.equal(await runStatus([], c.io), 0, c.err());
    assert.match(c.out(), /^NAMESPACE mimir$/m);
    assert.match(c.out(), /GROUP ingester {2}waiting/);
    assert.equal(c.err(), '');
    // The namespace itself is read first: a report of one that does not exist would read as "all is well".
    assert.equal(api.seen[0]?.path, '/api/v1/namespaces/mimir');
    const lists = api.seen.slice(1).filter((s) => !s.query.has('fieldSelector'));
    assert.ok(
      lists.every((s) => s.path.includes('/namespaces/mimir/') || s.path === '/api/v1/nodes'),
      lists.map((s) => s.path).join(' '),
    );
    for (const resource of ['configmaps', 'secrets']) {
      const request = lists.find((s) => s.path.endsWith(`/${resource}`));
      assert.ok(request, `lists ${resource}`);
      assert.match(request.accept, /as=PartialObjectMetadataList/);
    }
    assert.doesNotMatch(lists.find((s) => s.path.endsWith('/statefulsets'))!.accept, /PartialObjectMetadata/);
    assert.equal(
      lists.find((s) => s.path.endsWith('/leases'))?.query.get('labelSelector'),
      'stateward.dev/zpdb-ledger=true',
    );
  });

  it('uses "default" when the context names no namespace, and -n / --namespace when given (the last wins)', async () => {
    api.seen.length = 0;
    const c = capture();
    assert.equal(await runStatus(['--kubeconfig', config, '--context', 'bare', '-o', 'json'], c.io), 0);
    assert.deepEqual(
      (JSON.parse(c.out()) as { namespaces: { namespace: string }[] }).namespaces.map((n) => n.namespace),
      ['default'],
    );
    const d = capture();
    assert.equal(await runStatus(['--kubeconfig', config, '-n', 'a', '--namespace', 'other', '-output=json'], d.io), 0);
    assert.deepEqual(
      (JSON.parse(d.out()) as { namespaces: { namespace: string }[] }).namespaces.map((n) => n.namespace),
      ['other'],
    );
  });

  it('-A reports every namespace holding something, cluster-wide', async () => {
    api.seen.length = 0;
    const c = capture();
    assert.equal(await runStatus(['--kubeconfig', config, '-A', '-o', 'json'], c.io), 0);
    assert.deepEqual(
      (JSON.parse(c.out()) as { namespaces: { namespace: string }[] }).namespaces.map((n) => n.namespace),
      ['mimir', 'other'],
    );
    assert.ok(
      api.seen.every((s) => !s.path.includes('/namespaces/')),
      'no namespaced paths',
    );
  });

  it('names each forbidden list on stderr and still shows the rest; an absent ZPDB CRD means no budgets', async () => {
    api.forbidden = new Set(['secrets', 'leases', 'nodes']);
    api.noCrd = true;
    try {
      const c = capture();
      assert.equal(await runStatus(['--kubeconfig', config], c.io), 0);
      const warnings = c.err().trim().split('\n');
      assert.equal(warnings.length, 3, c.err());
      assert.ok(
        warnings.some((w) =>
          /^warning: forbidden to list secrets in namespace mimir \(missing permission: list secrets\)/.test(w),
        ),
      );
      assert.ok(warnings.some((w) => /list leases\.coordination\.k8s\.io/.test(w)));
      assert.ok(warnings.some((w) => /list nodes\)/.test(w) && /cluster-wide/.test(w)));
      assert.match(c.out(), /GROUP ingester/);
      assert.doesNotMatch(c.out(), /BUDGETS/);
      // Secrets unreadable: the Secret is not called missing.
      const querier = c
        .out()
        .split('\n')
        .find((l) => l.trim().startsWith('Deployment '))!
        .trim()
        .split(/\s{2,}/);
      assert.deepEqual([querier[1], querier[5]], ['querier', '-']);
    } finally {
      api.forbidden = new Set();
      api.noCrd = false;
    }
  });

  it('--watch prints a frame every interval, separated by a blank line, until stopped', async () => {
    const stop = new AbortController();
    const c = capture();
    const frames = () => c.out().split('\n\nstateward status at ').length;
    const run = runStatus(['--kubeconfig', config, '--watch', '--interval', '20ms'], { ...c.io, signal: stop.signal });
    const deadline = Date.now() + 10_000;
    while (frames() < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    stop.abort();
    assert.equal(await run, 0);
    assert.ok(frames() >= 3, c.out());
    assert.match(c.out(), /^stateward status at /);
    assert.match(c.out(), /ingester-zone-b +\[[█░]+\] 1\/3 updated/);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(c.out(), /\x1b\[/, 'no screen clearing when not a terminal');
  });

  it('--watch clears the screen before each frame on a terminal', async () => {
    const stop = new AbortController();
    const c = capture();
    const run = runStatus(['--kubeconfig', config, '--watch', '--interval', '20ms'], {
      ...c.io,
      isTTY: true,
      signal: stop.signal,
    });
    const deadline = Date.now() + 10_000;
    while (c.out().split('\x1b[H\x1b[2J').length < 3 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    stop.abort();
    assert.equal(await run, 0);
    assert.ok(c.out().startsWith('\x1b[H\x1b[2J'));
    assert.ok(c.out().split('\x1b[H\x1b[2J').length >= 3);
  });
});
