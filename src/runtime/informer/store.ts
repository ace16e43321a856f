// The informer's cache: objects by namespace/name, plus secondary indexes
// kept in step with every write.
import type { KubeObject } from '../kube/types.ts';

export type IndexFunc<T> = (object: T) => string[];

export function objectKey(object: KubeObject): string {
  const meta = object.metadata ?? {};
  return meta.namespace ? `${meta.namespace}/${meta.name ?? ''}` : (meta.name ?? '');
}

export class IndexedStore<T extends KubeObject> {
  private readonly items = new Map<string, T>();
  private readonly indexers: Record<string, IndexFunc<T>>;
  private readonly indexes = new Map<string, Map<string, Set<string>>>();

  constructor(indexers: Record<string, IndexFunc<T>> = {}) {
    this.indexers = indexers;
    for (const name of Object.keys(indexers)) this.indexes.set(name, new Map());
  }

  get size(): number {
    return this.items.size;
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  list(): T[] {
    return [...this.items.values()];
  }

  keys(): string[] {
    return [...this.items.keys()];
  }

  /** Inserts or replaces; returns the previous object. */
  set(key: string, object: T): T | undefined {
    const previous = this.items.get(key);
    if (previous) this.unindex(key, previous);
    this.items.set(key, object);
    this.index(key, object);
    return previous;
  }

  delete(key: string): T | undefined {
    const previous = this.items.get(key);
    if (previous) {
      this.unindex(key, previous);
      this.items.delete(key);
    }
    return previous;
  }

  byIndex(indexName: string, value: string): T[] {
    const index = this.indexes.get(indexName);
    if (!index)
      throw new Error(`no index named "${indexName}"; known: ${[...this.indexes.keys()].join(', ') || 'none'}`);
    return [...(index.get(value) ?? [])].map((key) => this.items.get(key)!).filter(Boolean);
  }

  private index(key: string, object: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) {
      const index = this.indexes.get(name)!;
      for (const value of safeIndexValues(fn, object)) {
        let keys = index.get(value);
        if (!keys) index.set(value, (keys = new Set()));
        keys.add(key);
      }
    }
  }

  private unindex(key: string, object: T): void {
    for (const [name, fn] of Object.entries(this.indexers)) {
      const index = this.indexes.get(name)!;
      for (const value of safeIndexValues(fn, object)) {
        const keys = index.get(value);
        keys?.delete(key);
        if (keys?.size === 0) index.delete(value);
      }
    }
  }
}

function safeIndexValues<T>(fn: IndexFunc<T>, object: T): string[] {
  try {
    return [...new Set(fn(object))];
  } catch {
    // A malformed object must not break the cache; it is just not indexed.
    return [];
  }
}

// ---- common index functions ---------------------------------------------------

export const indexByLabel =
  (label: string): IndexFunc<KubeObject> =>
  (o) => {
    const value = o.metadata?.labels?.[label];
    return value === undefined ? [] : [value];
  };

export const indexByOwnerUid: IndexFunc<KubeObject> = (o) => (o.metadata?.ownerReferences ?? []).map((r) => r.uid);

export const indexByNodeName: IndexFunc<KubeObject> = (o) => {
  const node = (o as { spec?: { nodeName?: string } }).spec?.nodeName;
  return node ? [node] : [];
};

/** Drops fields no controller reads before they reach the cache (managedFields can be half an object's size). */
export function stripManagedFields<T extends KubeObject>(object: T): T {
  if (object.metadata?.managedFields) {
    const { managedFields: _dropped, ...metadata } = object.metadata;
    return { ...object, metadata };
  }
  return object;
}
