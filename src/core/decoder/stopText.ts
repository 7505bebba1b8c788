/**
 * Stop-sequence matching on streamed text. Text that could still become the start of a stop string
 * is held back, so the stop text never reaches the client even when it spans token boundaries.
 */
export class StopMatcher {
  private pending = '';
  private readonly holdback: number;
  matched: string | null = null;

  constructor(private readonly stops: readonly string[]) {
    this.holdback = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** Feeds new text; returns what may be emitted now. After a match, `matched` is set. */
  push(text: string): string {
    if (this.matched !== null) return '';
    this.pending += text;
    if (this.stops.length === 0) {
      const out = this.pending;
      this.pending = '';
      return out;
    }
    let cut = -1;
    for (const s of this.stops) {
      if (!s) continue;
      const i = this.pending.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) {
        cut = i;
        this.matched = s;
      }
    }
    if (cut >= 0) {
      const out = this.pending.slice(0, cut);
      this.pending = '';
      return out;
    }
    // Keep only as much as could be the beginning of a stop string.
    let keep = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, this.pending.length); k > keep; k--) {
        if (s.startsWith(this.pending.slice(this.pending.length - k))) {
          keep = k;
          break;
        }
      }
    }
    keep = Math.min(keep, this.holdback);
    const out = this.pending.slice(0, this.pending.length - keep);
    this.pending = this.pending.slice(this.pending.length - keep);
    return out;
  }

  /** At the end of generation: whatever was held back is real output. */
  flush(): string {
    const out = this.matched === null ? this.pending : '';
    this.pending = '';
    return out;
  }
}
