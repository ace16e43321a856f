// The eviction ledger of one ZPDB: the evictions allowed recently whose
// pods the caches may not show as going yet. rollout-operator keeps this in
// one process's memory, so two replicas serving the webhook each allow one
// eviction against the same budget. Here it is an annotation on a Lease in
// the ZPDB's namespace, written with optimistic concurrency: every allowed
// eviction is a write whose resourceVersion must match the ledger the
// decision was made on, so of two concurrent allows against one budget only
// one commits; the other re-reads and decides again. Pure parts.
import { createHash } from 'node:crypto';
import type { Lease, Pod } from '../../runtime/kube/types.ts';
import { EVICTION_CACHE_TTL_MS } from './decide.ts';
import { LEDGER_ANNOTATION } from '../../vocabulary/keys.ts';

export interface LedgerEntry {
  pod: string;
  /** When the eviction was allowed (epoch ms). */
  at: number;
}

/** By pod UID. */
export type Ledger = Map<string, LedgerEntry>;

/** A Lease name (a DNS label) unique per ZPDB name. */
export function ledgerName(zpdb: string): string {
  const safe = zpdb
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 30);
  return `stateward-zpdb-${safe || 'budget'}-${createHash('sha256').update(zpdb).digest('hex').slice(0, 8)}`;
}

/** The entries of a ledger Lease; a malformed annotation reads as empty, with a warning. */
export function decodeLedger(lease: Lease | undefined): { ledger: Ledger; warning?: string } {
  const raw = lease?.metadata?.annotations?.[LEDGER_ANNOTATION];
  const ledger: Ledger = new Map();
  if (raw === undefined || raw === '') return { ledger };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {
      ledger,
      warning: `annotation ${LEDGER_ANNOTATION} of Lease ${lease?.metadata?.name} is not JSON; starting an empty ledger`,
    };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return {
      ledger,
      warning: `annotation ${LEDGER_ANNOTATION} of Lease ${lease?.metadata?.name} is not a JSON object; starting an empty ledger`,
    };
  for (const [uid, value] of Object.entries(parsed as Record<string, unknown>)) {
    const entry = value as Partial<LedgerEntry> | null;
    if (entry && typeof entry.pod === 'string' && typeof entry.at === 'number' && Number.isFinite(entry.at))
      ledger.set(uid, { pod: entry.pod, at: entry.at });
  }
  return { ledger };
}

export function encodeLedger(ledger: Ledger): string {
  return JSON.stringify(Object.fromEntries([...ledger].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}

/**
 * Drops entries that no longer hold anything back: older than the eviction
 * TTL, or whose pod the cache shows gone, terminating or no longer Running
 * (from then on the cache itself counts the pod as unavailable).
 */
export function pruneLedger(ledger: Ledger, now: number, podNamed: (name: string) => Pod | undefined): Ledger {
  const kept: Ledger = new Map();
  for (const [uid, entry] of ledger) {
    if (now - entry.at >= EVICTION_CACHE_TTL_MS) continue;
    const pod = podNamed(entry.pod);
    // Another pod under that name is a replacement: the evicted one is gone.
    if (
      !pod ||
      pod.metadata?.uid !== uid ||
      pod.metadata.deletionTimestamp ||
      (pod.status?.phase !== undefined && pod.status.phase !== 'Running')
    )
      continue;
    kept.set(uid, entry);
  }
  return kept;
}

/** The ledger as the decision's pending evictions (uid → allowed at). */
export function pendingFrom(ledger: Ledger): Map<string, number> {
  return new Map([...ledger].map(([uid, entry]) => [uid, entry.at]));
}
