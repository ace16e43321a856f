// Small readings the soak monitor's rule sets share (invariants.ts and the
// rules it delegates to): an object's resourceVersion as a number to order
// by, and a time for a violation's text.

/** The resourceVersion as a bigint (the apiserver's are etcd revisions); 0 when absent or not a number. */
export const rvOf = (meta: { resourceVersion?: string } | undefined): bigint => {
  try {
    return BigInt(meta?.resourceVersion ?? '0');
  } catch {
    return 0n;
  }
};

/** Epoch ms as ISO 8601, as violations print times. */
export const iso = (ms: number) => new Date(ms).toISOString();
