/**
 * A pure TypeScript model of a cost budget with reservations, written from its
 * definition (issue 13): a token bucket of cost units; a reservation holds its
 * estimate until settled or until its hold expires (then it is given back);
 * a settle replaces the hold by the actual cost, is applied once, and after
 * the hold expired debits the actual cost then. It answers the scripts' reply
 * layouts (lua/reserve.lua, lua/settle.lua) so both compare to the µs.
 */
export class BudgetModel {
  #debtUntil: number | undefined; // the bucket's TAT, µs
  readonly #holds = new Map<string, { units: number; expiresUs: number }>();
  readonly #released = new Map<string, number>();
  readonly #settled = new Map<string, number>();

  readonly capacity: number;
  readonly intervalUs: number;
  readonly holdUs: number;
  readonly rememberUs: number;

  constructor(capacity: number, intervalUs: number, holdUs: number, rememberUs: number) {
    this.capacity = capacity;
    this.intervalUs = intervalUs;
    this.holdUs = holdUs;
    this.rememberUs = rememberUs;
  }

  #debt(now: number): number {
    return Math.max(0, (this.#debtUntil ?? now) - now);
  }

  #setDebt(now: number, debt: number): void {
    this.#debtUntil = debt > 0 ? now + debt : undefined;
  }

  #expire(now: number): void {
    for (const [id, hold] of this.#holds) {
      if (hold.expiresUs > now) continue;
      this.#setDebt(now, Math.max(0, this.#debt(now) - hold.units * this.intervalUs));
      this.#holds.delete(id);
      this.#released.set(id, now);
    }
    for (const memory of [this.#released, this.#settled]) {
      for (const [id, at] of memory) if (at <= now - this.rememberUs) memory.delete(id);
    }
  }

  #standing(now: number): [number, number] {
    const debt = this.#debt(now);
    return [Math.floor((this.capacity * this.intervalUs - debt) / this.intervalUs), debt];
  }

  reserve(id: string, units: number, now: number): number[] {
    this.#expire(now);
    if (this.#holds.has(id)) return [1, ...this.#standing(now)];
    if (this.#settled.has(id) || this.#released.has(id)) return [2, ...this.#standing(now)];
    const debt = this.#debt(now);
    const burst = this.capacity * this.intervalUs;
    const after = debt + units * this.intervalUs;
    if (after > burst) return [0, Math.floor((burst - debt) / this.intervalUs), debt, after - burst];
    this.#setDebt(now, after);
    this.#holds.set(id, { units, expiresUs: now + this.holdUs });
    return [1, Math.floor((burst - after) / this.intervalUs), after];
  }

  settle(id: string, actual: number, now: number): number[] {
    this.#expire(now);
    let outcome: number;
    const hold = this.#holds.get(id);
    if (this.#settled.has(id)) outcome = 3;
    else if (hold) {
      const delta = (actual - hold.units) * this.intervalUs;
      this.#setDebt(now, Math.max(0, this.#debt(now) + delta));
      this.#holds.delete(id);
      outcome = 1;
    } else if (this.#released.has(id)) {
      this.#setDebt(now, this.#debt(now) + actual * this.intervalUs);
      this.#released.delete(id);
      outcome = 2;
    } else outcome = 4;
    if (outcome === 1 || outcome === 2) this.#settled.set(id, now);
    return [outcome, ...this.#standing(now)];
  }
}
