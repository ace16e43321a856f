// The raw-request generator of the HTTP fuzzer (http-requests.ts), without a
// server: batches are a pure function of the seed, they cover every kind of
// input the fuzzer promises, and a reported request's escaped bytes read
// back to the same bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { batchAt, escapeBytes, requestBytes, routesFor } from './http-requests.ts';
import { FUZZ_SEED, params } from './support.ts';

const routes = routesFor('fuzz-ns');

describe('raw HTTP request generator', () => {
  it('gives the same batch for the same seed and index, and another for another index', () => {
    const a = batchAt(FUZZ_SEED, 3, 50, routes).map((c) => requestBytes(c.request));
    const b = batchAt(FUZZ_SEED, 3, 50, routes).map((c) => requestBytes(c.request));
    const c = batchAt(FUZZ_SEED, 4, 50, routes).map((x) => requestBytes(x.request));
    assert.ok(a.every((bytes, i) => bytes.equals(b[i]!)));
    assert.ok(a.some((bytes, i) => !bytes.equals(c[i]!)));
  });

  it('covers both servers, every kind of case, every routed path, odd targets and framings', () => {
    const cases = Array.from({ length: 8 }, (_, i) => batchAt(FUZZ_SEED, i, 200, routes)).flat();
    const kinds = new Set(cases.map((c) => `${c.server} ${c.request.kind.split(':')[0]}`));
    for (const server of ['plain', 'tls'])
      for (const kind of ['structured', 'mutated', 'pipelined', 'random', 'soup', 'crash-target'])
        assert.ok(kinds.has(`${server} ${kind}`), `no ${kind} case for the ${server} server`);
    assert.ok(kinds.has('tls no-handshake'));
    const text = cases.map((c) => requestBytes(c.request).toString('latin1'));
    for (const path of [...routes.plain, ...routes.tls])
      assert.ok(
        text.some((t) => t.includes(` ${path} HTTP/1.1\r\n`)),
        `no good request to ${path}`,
      );
    const needles = [
      / \/\/ HTTP\/1\.1/,
      /http:\/\/a:99999\//,
      /http:\/\/\[::1\//,
      /Transfer-Encoding: chunked/,
      /Content-Length: [^0-9\r]/,
      /Content-Length: \d+\r\nTransfer-Encoding: chunked/,
      /100-continue/,
      /\r\n x|\r\n folded/,
      /%zz/,
    ];
    for (const needle of needles)
      assert.ok(
        text.some((t) => needle.test(t)),
        `nothing matches ${needle}`,
      );
    const framings = new Set(cases.map((c) => c.request.kind).filter((k) => k.startsWith('structured:')));
    assert.ok(framings.size >= 8, `only ${[...framings].join(', ')}`);
  });

  it('escapes bytes into a JavaScript expression that gives them back', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 300 }),
          fc
            .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 20, max: 5_000 }))
            .map(([b, n]) => new Uint8Array(n).fill(b)),
        ),
        (array) => {
          const bytes = Buffer.from(array);
          const expression = escapeBytes(bytes, Infinity);
          assert.ok(bytes.equals(Buffer.from(runInNewContext(expression) as string, 'latin1')), expression);
        },
      ),
      params(300, 21),
    );
  });
});
