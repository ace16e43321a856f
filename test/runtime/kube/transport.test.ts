// The API client's HTTP transport against a local plain HTTP server: chunks
// handed out as received (the caller zeroes them), keep-alive reuse, gzip
// answers decoded, aborts and dropped connections surfacing as errors with
// the connection gone, and a pool closed once its exchanges end.
import assert from 'node:assert/strict';
import { createServer, IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { EventEmitter } from 'node:events';
import { gzipSync } from 'node:zlib';
import { chunks, closePool, connectionPool, exchange, type Exchange } from '../../../src/runtime/kube/transport.ts';
import { waitFor } from '../../cluster/probe.ts';

async function text(response: Exchange): Promise<string> {
  const parts: Buffer[] = [];
  try {
    for await (const chunk of response.body) parts.push(Buffer.from(chunk));
  } finally {
    response.close();
  }
  return Buffer.concat(parts).toString('utf8');
}

/** Waits (with a deadline) until the test server holds `count` connections. */
const serverConnections = (open: Set<Socket>, count: number) =>
  waitFor(`the server to hold ${count} connection(s) (holds ${open.size})`, () => open.size === count, {
    timeoutMs: 5000,
    intervalMs: 5,
  });

describe('chunks', () => {
  it('hands out every pushed buffer itself, never a concatenation of what accumulated', async () => {
    const stream = new PassThrough();
    const written = [Buffer.from('aa'), Buffer.from('bb'), Buffer.from('cc')];
    for (const buffer of written) stream.write(buffer);
    stream.end();
    // All three wait in the stream's buffer before the first read, where they could be joined.
    assert.equal(stream.readableLength, 6);
    const seen: Buffer[] = [];
    for await (const chunk of chunks(stream)) seen.push(chunk);
    assert.equal(seen.length, 3);
    seen.forEach((chunk, i) => assert.equal(chunk, written[i], `chunk ${i} is the buffer pushed`));
  });

  it("throws the stream's error, and destroys a stream left early", async () => {
    const failing = new PassThrough();
    failing.write(Buffer.from('a'));
    await assert.rejects(
      (async () => {
        // The stream fails while the reader holds its first chunk.
        for await (const _ of chunks(failing))
          failing.destroy(Object.assign(new Error('boom'), { code: 'ECONNRESET' }));
      })(),
      { code: 'ECONNRESET' },
    );
    const left = new PassThrough();
    left.write(Buffer.from('a'));
    for await (const _ of chunks(left)) break;
    assert.equal(left.destroyed, true);
  });
});

describe('exchange', () => {
  let server: Server;
  let url = '';
  const open = new Set<Socket>();
  const ports: number[] = [];
  /** Emits each request's path once the server has it. */
  const arrivals = new EventEmitter();
  const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
    '/echo': (req, res) => {
      const body: Buffer[] = [];
      req.on('data', (chunk: Buffer) => body.push(chunk));
      req.on('end', () => {
        res.setHeader('x-twice', ['a', 'b']);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ body: Buffer.concat(body).toString('utf8'), headers: req.headers }));
      });
    },
    '/gzip': (_req, res) => {
      const zipped = gzipSync(JSON.stringify({ items: Array.from({ length: 2000 }, (_, i) => `item-${i}`) }));
      res.writeHead(200, { 'content-encoding': 'gzip' });
      // In small pieces: the decoder sees many chunks.
      let at = 0;
      const next = () => {
        if (at >= zipped.length) return void res.end();
        res.write(zipped.subarray(at, (at += 97)));
        setImmediate(next);
      };
      next();
    },
    '/plain': (_req, res) => {
      res.writeHead(200);
      let left = 50;
      const next = () => {
        if (left-- === 0) return void res.end();
        res.write('secret '.repeat(100));
        setImmediate(next);
      };
      next();
    },
    '/hang': () => undefined,
    '/stream': (_req, res) => {
      res.writeHead(200);
      res.write('first\n');
    },
    '/cut': (req, res) => {
      res.writeHead(200);
      // Dropped once 'partial' is on its way: the client gets a started answer, then the cut.
      res.write('partial', () => req.socket.destroy());
    },
  };

  before(async () => {
    server = createServer((req, res) => {
      ports.push(req.socket.remotePort ?? 0);
      routes[req.url ?? '']?.(req, res);
      arrivals.emit(req.url ?? '');
    });
    server.on('connection', (socket: Socket) => {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const send = (pool: ReturnType<typeof connectionPool>, path: string, signal = AbortSignal.timeout(5000)) =>
    exchange(url + path, { pool, method: 'GET', headers: {}, signal });

  it('sends the body with its length, joins repeated headers, and reuses one kept-alive connection', async () => {
    const pool = connectionPool('http:', {});
    try {
      ports.length = 0;
      for (const body of ['é', 'second']) {
        const response = await exchange(`${url}/echo`, {
          pool,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(5000),
        });
        assert.equal(response.status, 200);
        assert.equal(response.header('X-Twice'), 'a, b');
        assert.equal(response.header('retry-after'), null);
        const echoed = JSON.parse(await text(response)) as { body: string; headers: Record<string, string> };
        assert.equal(echoed.body, body);
        assert.equal(echoed.headers['content-length'], String(Buffer.byteLength(body)));
      }
      assert.equal(new Set(ports).size, 1, 'one connection for both requests');
    } finally {
      await closePool(pool);
    }
  });

  it('decodes a gzipped answer', async () => {
    const pool = connectionPool('http:', {});
    try {
      const body = JSON.parse(await text(await send(pool, '/gzip'))) as { items: string[] };
      assert.equal(body.items.length, 2000);
      assert.equal(body.items[1999], 'item-1999');
    } finally {
      await closePool(pool);
    }
  });

  it('leaves no received byte unzeroed once the caller zeroed each chunk it was handed, gzipped or not', async (t) => {
    const received: Buffer[] = [];
    // What the HTTP parser hands the response, as it is received.
    t.mock.method(IncomingMessage.prototype, 'push', function (this: IncomingMessage, chunk: unknown) {
      if (Buffer.isBuffer(chunk)) received.push(chunk);
      return Readable.prototype.push.call(this, chunk);
    });
    const pool = connectionPool('http:', {});
    try {
      for (const path of ['/plain', '/gzip']) {
        received.length = 0;
        const response = await send(pool, path);
        let handed = 0;
        for await (const chunk of response.body) {
          handed += chunk.length;
          chunk.fill(0);
        }
        response.close();
        assert.ok(handed > 10_000 && received.length > 1, path);
        for (const chunk of received)
          assert.ok(
            chunk.every((byte) => byte === 0),
            `${path}: a received chunk zeroed`,
          );
      }
    } finally {
      await closePool(pool);
    }
  });

  it('rejects with the abort reason before the answer, and with the body read, closing the connection', async () => {
    const pool = connectionPool('http:', {});
    try {
      const reason = new Error('caller gave up');
      const controller = new AbortController();
      // Aborted once the server has the request, before any answer.
      arrivals.once('/hang', () => controller.abort(reason));
      await assert.rejects(send(pool, '/hang', controller.signal), (error) => error === reason);
      const streaming = new AbortController();
      const response = await send(pool, '/stream', streaming.signal);
      const read = (async () => {
        for await (const _ of response.body) streaming.abort(reason);
      })();
      await assert.rejects(read, (error) => error === reason);
      response.close();
      await serverConnections(open, 0);
      assert.deepEqual(Object.keys(pool.sockets), []);
    } finally {
      await closePool(pool);
    }
  });

  it('fails the body with ECONNRESET when the server drops the connection mid-answer', async () => {
    const pool = connectionPool('http:', {});
    try {
      const response = await send(pool, '/cut');
      await assert.rejects(text(response), { code: 'ECONNRESET' });
    } finally {
      await closePool(pool);
    }
  });

  it('rejects with the system error code when the server cannot be reached', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const pool = connectionPool('http:', {});
    await assert.rejects(
      exchange(`http://127.0.0.1:${port}/`, { pool, method: 'GET', headers: {}, signal: AbortSignal.timeout(5000) }),
      { code: 'ECONNREFUSED' },
    );
    await closePool(pool);
  });

  it('closes a pool: idle connections at once, a busy one once its exchange ends', async () => {
    const pool = connectionPool('http:', {});
    const streaming = new AbortController();
    const response = await send(pool, '/stream', streaming.signal);
    await text(await send(pool, '/echo'));
    // The server answered both, so it accepted both connections.
    assert.equal(open.size, 2);
    let closed = false;
    const closing = closePool(pool).then(() => (closed = true));
    // The idle connection is closed...
    await serverConnections(open, 1);
    assert.equal(closed, false, 'waits for the exchange in flight');
    streaming.abort(new Error('done'));
    response.close();
    await closing;
    await serverConnections(open, 0);
  });
});
