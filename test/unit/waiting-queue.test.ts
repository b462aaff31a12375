// WaitingQueue against a model: the jobs in arrival order, stably sorted by priority then age.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Priority, WaitingJob } from "../../src/mediajob/fair-share.js";
import { WaitingQueue } from "../../src/mediajob/waiting-queue.js";

const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };
const inOrder = (jobs: WaitingJob[]): string[] =>
  [...jobs]
    .sort((a, b) => RANK[a.priority ?? "normal"] - RANK[b.priority ?? "normal"] || a.createdAt - b.createdAt)
    .map((j) => j.id);

const job = (id: string, createdAt: number, priority?: Priority): WaitingJob => ({
  id,
  account: "a",
  createdAt,
  ...(priority && { priority }),
});

describe("WaitingQueue", () => {
  it("orders by priority, then age, then arrival", () => {
    const q = new WaitingQueue();
    for (const j of [
      job("late", 5),
      job("low", 1, "low"),
      job("urgent", 9, "high"),
      job("early", 2),
      job("tie", 5),
    ])
      q.add(j);
    expect([...q].map((j) => j.id)).toEqual(["urgent", "early", "late", "tie", "low"]);
    expect([...q.withArriving(job("new", 5))].map((j) => j.id)).toEqual([
      "urgent",
      "early",
      "late",
      "tie",
      "new",
      "low",
    ]);
    expect(q.delete("late")).toBe(true);
    expect(q.delete("late")).toBe(false);
    q.add(job("tie", 5)); // arrives again: after every job of its priority and age
    expect([...q].map((j) => j.id)).toEqual(["urgent", "early", "tie", "low"]);
    expect(q.size).toBe(4);
  });

  it("keeps the model's order through any arrivals and departures", () => {
    const op = fc.oneof(
      fc.record({
        add: fc.integer({ min: 0, max: 9 }),
        createdAt: fc.integer({ min: 0, max: 3 }),
        priority: fc.constantFrom<Priority | undefined>("high", "normal", "low", undefined),
      }),
      fc.record({ remove: fc.integer({ min: 0, max: 9 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.integer({ min: 0, max: 3 }), (ops, arrivingAt) => {
        const q = new WaitingQueue();
        let model: WaitingJob[] = [];
        for (const o of ops) {
          if ("add" in o) {
            const j = job(`j${o.add}`, o.createdAt, o.priority);
            q.add(j);
            model = [...model.filter((m) => m.id !== j.id), j];
          } else {
            const id = `j${o.remove}`;
            expect(q.delete(id)).toBe(model.some((m) => m.id === id));
            model = model.filter((m) => m.id !== id);
          }
          expect([...q].map((j) => j.id)).toEqual(inOrder(model));
          expect(q.size).toBe(model.length);
        }
        const arriving = job("new", arrivingAt, "normal");
        expect([...q.withArriving(arriving)].map((j) => j.id)).toEqual(inOrder([...model, arriving]));
      }),
      { numRuns: 300 },
    );
  });
});
