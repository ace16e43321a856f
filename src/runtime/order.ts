// One order for names, uids and keys: by UTF-16 code unit, as Go's sort of
// strings orders them. Not localeCompare: that order depends on ICU's
// collation rules (punctuation and case are weighed differently), and its
// first call maps ~2.6 MiB of Node's ICU data into memory for nothing.
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
