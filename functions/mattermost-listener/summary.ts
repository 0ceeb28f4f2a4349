/** What happened to the posts of each channel, and when it is worth logging again. */

/** What happened to the posts of one channel. */
export interface ChannelSummary {
  admitted: number;
  refused: number;
  /** Refused because the limiter could not decide within `holdMs`, or the buffer was full. */
  expired: number;
  overflow: number;
  /** Admitted, but the sink did not take it within `holdMs` (or by the stop): given up. */
  unsunk: number;
  duplicates: number;
}

export class ChannelSummaries {
  readonly byChannel = new Map<string, ChannelSummary>();
  #logged = '';

  /** A channel's counts, made on first use. */
  of(channel: string): ChannelSummary {
    let summary = this.byChannel.get(channel);
    if (!summary) {
      summary = { admitted: 0, refused: 0, expired: 0, overflow: 0, unsunk: 0, duplicates: 0 };
      this.byChannel.set(channel, summary);
    }
    return summary;
  }

  /** Every channel's counts, as logged. */
  all(): Record<string, ChannelSummary> {
    return Object.fromEntries(this.byChannel);
  }

  /** The counts when they changed since the last call that returned them, else undefined. */
  changed(): Record<string, ChannelSummary> | undefined {
    const text = JSON.stringify(this.all());
    if (text === this.#logged) return undefined;
    this.#logged = text;
    return this.all();
  }
}
