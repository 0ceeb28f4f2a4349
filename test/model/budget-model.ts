/**
 * A pure TypeScript model of a cost budget with reservations, written from its
 * definition (issues 13 and 29): a token bucket of cost units; a reservation
 * charges its estimate at once and holds it until settled; a hold that lapses
 * unsettled stays charged (a crash refunds nothing) and is remembered for the
 * retention after its lapse; a settle replaces the hold by the actual cost
 * (before or after the lapse alike), is applied once, and settled ids are
 * remembered for the retention. It answers the scripts' reply layouts
 * (lua/reserve.lua, lua/settle.lua) so both compare to the µs. (The scripts'
 * cap on remembered ids, 10 000, is never reached by the property's runs.)
 */
export class BudgetModel {
  #debtUntil: number | undefined; // the bucket's TAT, µs
  readonly #holds = new Map<string, { units: number; lapsesUs: number }>();
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

  #forget(now: number): void {
    for (const [id, hold] of this.#holds) if (hold.lapsesUs <= now - this.rememberUs) this.#holds.delete(id);
    for (const [id, at] of this.#settled) if (at <= now - this.rememberUs) this.#settled.delete(id);
  }

  #standing(now: number): [number, number] {
    const debt = this.#debt(now);
    return [Math.floor((this.capacity * this.intervalUs - debt) / this.intervalUs), debt];
  }

  reserve(id: string, units: number, now: number): number[] {
    this.#forget(now);
    const hold = this.#holds.get(id);
    if (hold) return [hold.lapsesUs > now ? 1 : 2, ...this.#standing(now)];
    if (this.#settled.has(id)) return [2, ...this.#standing(now)];
    const debt = this.#debt(now);
    const burst = this.capacity * this.intervalUs;
    const after = debt + units * this.intervalUs;
    if (after > burst) return [0, Math.floor((burst - debt) / this.intervalUs), debt, after - burst];
    this.#setDebt(now, after);
    this.#holds.set(id, { units, lapsesUs: now + this.holdUs });
    return [1, Math.floor((burst - after) / this.intervalUs), after];
  }

  settle(id: string, actual: number, now: number): number[] {
    this.#forget(now);
    const hold = this.#holds.get(id);
    let outcome = 4;
    if (this.#settled.has(id)) outcome = 3;
    else if (hold) {
      const delta = (actual - hold.units) * this.intervalUs;
      this.#setDebt(now, Math.max(0, this.#debt(now) + delta));
      this.#holds.delete(id);
      this.#settled.set(id, now);
      outcome = hold.lapsesUs > now ? 1 : 2;
    }
    return [outcome, ...this.#standing(now)];
  }
}
