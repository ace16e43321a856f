import { cpus, totalmem } from 'node:os';

export function machine(): string {
  const cpu = cpus();
  return `${cpu.length} × ${cpu[0]?.model ?? 'unknown cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** The p-th percentile (nearest rank); NaN for no values. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

export const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
export const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export function report(name: string, text: string): void {
  console.log(`${name.padEnd(28)} ${text}`);
}

/** A positive number from the environment variable `name`, or `fallback` when it is unset or empty. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return n;
}

/** Adds one to `key`'s count. */
export function tally(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** "a 3, b 1": the counts, most first; `none` when there are none. */
export function listCounts(counts: Map<string, number>, none = 'none'): string {
  return (
    [...counts]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || none
  );
}
