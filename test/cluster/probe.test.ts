import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { describe, it } from 'node:test';
import { DeadlineError, httpStatus, waitFor } from './probe.ts';
import { freePorts } from './ports.ts';

describe('waitFor', () => {
  it('returns the first truthy value', async () => {
    let calls = 0;
    const value = await waitFor('three calls', () => (++calls === 3 ? 'done' : undefined), {
      timeoutMs: 5000,
      intervalMs: 1,
    });
    assert.equal(value, 'done');
    assert.equal(calls, 3);
  });

  it('fails with the description and the last error at the deadline', async () => {
    await assert.rejects(
      waitFor(
        'the impossible',
        () => {
          throw new Error('still broken');
        },
        { timeoutMs: 50, intervalMs: 5 },
      ),
      (error: Error) =>
        error instanceof DeadlineError && /the impossible/.test(error.message) && /still broken/.test(error.message),
    );
  });

  it('stops at once when fail() reports a failure', async () => {
    const started = Date.now();
    await assert.rejects(
      waitFor('never', () => false, { timeoutMs: 60_000, fail: () => 'etcd exited with code 1; log: /x' }),
      /etcd exited/,
    );
    assert.ok(Date.now() - started < 5000);
  });
});

describe('httpStatus', () => {
  it('reports the status code, or undefined when nothing listens', async () => {
    const server = createServer((_req, res) => {
      res.statusCode = 503;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      assert.equal(await httpStatus(`http://127.0.0.1:${port}/readyz`), 503);
    } finally {
      server.close();
    }
    const [unused] = await freePorts(1);
    assert.equal(await httpStatus(`http://127.0.0.1:${unused}/readyz`), undefined);
  });
});

describe('freePorts', () => {
  it('returns distinct bindable ports', async () => {
    const ports = await freePorts(6);
    assert.equal(new Set(ports).size, 6);
    for (const port of ports) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
      server.close();
    }
  });
});
