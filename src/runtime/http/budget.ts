// A byte budget shared by every connection of a server: request bodies are
// counted against it from the moment they are read until their response is
// sent, so the memory hostile or merely large requests can pin at once is
// bounded by one number instead of by the number of connections.

export class ByteBudget {
  readonly limit: number;
  private used = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  get inUse(): number {
    return this.used;
  }

  /** Takes `bytes` if they fit; false (and nothing taken) when they don't. */
  tryTake(bytes: number): boolean {
    if (bytes < 0 || this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }

  /**
   * A holder of part of the budget for one request: it takes more as the
   * body arrives and gives everything back once, when released.
   */
  hold(): BudgetHold {
    let held = 0;
    let released = false;
    return {
      take: (bytes) => {
        if (released || !this.tryTake(bytes)) return false;
        held += bytes;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.give(held);
        held = 0;
      },
    };
  }
}

export interface BudgetHold {
  take(bytes: number): boolean;
  release(): void;
}
