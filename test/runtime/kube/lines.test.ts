import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { LineSplitter } from '../../../src/runtime/kube/client.ts';

/** Splits `text` at `cuts`, runs the pieces through a LineSplitter, zeroes each line as the watch does. */
function split(text: Buffer, cuts: number[]): { lines: string[]; chunks: Buffer[] } {
  const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const point of [...points, text.length]) {
    if (point > from) chunks.push(Buffer.from(text.subarray(from, point)));
    from = Math.max(from, point);
  }
  const splitter = new LineSplitter();
  const lines: string[] = [];
  const consume = (line: Buffer) => {
    lines.push(line.toString('utf8'));
    line.fill(0);
  };
  for (const chunk of chunks) splitter.push(chunk).forEach(consume);
  const last = splitter.end();
  if (last) consume(last);
  return { lines, chunks };
}

describe('LineSplitter (watch streams)', () => {
  it('property: any chunking gives the lines of the text, and leaves no byte of any chunk behind', () => {
    const line = fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', '{', '"'), maxLength: 12 });
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 6 }),
        fc.boolean(),
        fc.array(fc.nat(200), { maxLength: 8 }),
        (parts, trailingNewline, cuts) => {
          const text = Buffer.from(parts.join('\n') + (trailingNewline && parts.length > 0 ? '\n' : ''), 'utf8');
          const { lines, chunks } = split(text, cuts);
          // A stream that ends with a newline has no line after it.
          const expected = text.toString('utf8').split('\n');
          if (expected.at(-1) === '') expected.pop();
          assert.deepEqual(lines, expected);
          for (const chunk of chunks)
            assert.ok(
              chunk.every((b) => b === 0 || b === 0x0a),
              'only newlines are left in a chunk',
            );
        },
      ),
      { numRuns: 500 },
    );
  });
});
