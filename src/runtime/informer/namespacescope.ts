// Which namespaces an install acts in when several installs split one
// cluster (-kubernetes.namespace-selector, -kubernetes.namespaces-to-ignore;
// Reloader's --namespace-selector and --namespaces-to-ignore). It lives in
// the shared informers, so every capability — rollouts, restarts, webhooks'
// decisions — sees the same objects without knowing the filter exists: an
// object of a namespace out of scope is kept in the cache but neither
// delivered nor returned, and delivered (as an add, or a delete) the moment
// its namespace's labels start (or stop) matching. The API server evaluates
// the selector: the namespaces cache is listed and watched with it, and a
// namespace whose labels stop matching arrives as a delete.

/** What an informer asks of the scope. */
export interface NamespaceScope {
  /** Whether objects of `namespace` are visible; cluster-scoped objects (no namespace) always are. */
  admits(namespace: string | undefined): boolean;
  /** Calls `listener` whenever a namespace enters (true) or leaves (false) the scope; returns an unsubscribe. */
  onChange(listener: (namespace: string, admitted: boolean) => void): () => void;
}

/**
 * Reloader's --namespace-selector values, as one Kubernetes label selector:
 * each comma-separated field of the legacy form `key:value` becomes
 * `key=value`, and `key:*` becomes `key` (the label exists); any other field
 * is kept as it is, so `env in (a,b)` split at its comma is joined back
 * whole. A label key and value never hold a colon, so the forms cannot be
 * confused.
 */
export function namespaceSelectorText(fields: readonly string[]): string {
  return fields
    .flatMap((f) => f.split(','))
    .map((field) => {
      const colon = field.indexOf(':');
      if (colon < 0) return field.trim();
      const key = field.slice(0, colon).trim();
      const value = field.slice(colon + 1).trim();
      return value === '*' ? key : `${key}=${value}`;
    })
    .filter((f) => f !== '')
    .join(',');
}

export interface NamespaceScopeConfig {
  /** A label selector the namespaces must match ('' for none: only the ignored are left out). */
  selector: string;
  ignored: readonly string[];
}

/**
 * Whether a namespace is in scope; `selected`: the namespaces cache (listed
 * with the selector) holds it. A namespace not seen yet is out until it is
 * (then its objects are delivered). Pure.
 */
export function inScope(config: NamespaceScopeConfig, namespace: string, selected: boolean): boolean {
  if (config.ignored.includes(namespace)) return false;
  return config.selector === '' || selected;
}

/**
 * The scope, fed by the namespaces cache (observe/forget) when there is a
 * selector: remembers which namespaces are in and tells the informers of
 * each change. Ignored namespaces alone need no cache.
 */
export class NamespaceFilter implements NamespaceScope {
  private readonly config: NamespaceScopeConfig;
  private readonly admitted = new Set<string>();
  private readonly listeners = new Set<(namespace: string, admitted: boolean) => void>();

  constructor(config: NamespaceScopeConfig) {
    this.config = config;
  }

  /** The selector the namespaces cache lists with; '' when names alone decide (no cache needed). */
  get selector(): string {
    return this.config.selector;
  }

  admits(namespace: string | undefined): boolean {
    if (namespace === undefined) return true;
    return this.config.selector === '' ? inScope(this.config, namespace, false) : this.admitted.has(namespace);
  }

  onChange(listener: (namespace: string, admitted: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A namespace the selector matches (in the namespaces cache). */
  observe(namespace: string): void {
    this.set(namespace, inScope(this.config, namespace, true));
  }

  /** A namespace gone from the namespaces cache: deleted, or its labels no longer match. */
  forget(namespace: string): void {
    this.set(namespace, false);
  }

  private set(namespace: string, admitted: boolean): void {
    if (this.admitted.has(namespace) === admitted) return;
    if (admitted) this.admitted.add(namespace);
    else this.admitted.delete(namespace);
    for (const listener of this.listeners) listener(namespace, admitted);
  }
}
