// Simulated time. Every delay the simulator models (cold start, execution, callback retry, status
// retention, ...) is given in simulated milliseconds and multiplied by `timeScale` to get real
// milliseconds, so tests can run the provider 100x faster. All timers are tracked so close()
// leaves nothing behind.

export type TimerHandle = ReturnType<typeof setTimeout>;

export class Clock {
  readonly timeScale: number;
  readonly #timers = new Set<TimerHandle>();
  readonly #epoch = Date.now();
  #closed = false;

  constructor(timeScale: number) {
    if (!(timeScale > 0) || !Number.isFinite(timeScale))
      throw new Error("timeScale must be a positive number");
    this.timeScale = timeScale;
  }

  /** Runs fn after `simMs` simulated milliseconds. */
  after(simMs: number, fn: () => void): TimerHandle {
    return this.afterReal(Math.max(0, simMs) * this.timeScale, fn);
  }

  /** Runs fn after real milliseconds (used for faults that are about wall-clock behaviour). */
  afterReal(realMs: number, fn: () => void): TimerHandle {
    const handle = setTimeout(() => {
      this.#timers.delete(handle);
      if (!this.#closed) fn();
    }, realMs);
    this.#timers.add(handle);
    return handle;
  }

  cancel(handle: TimerHandle | undefined): void {
    if (handle === undefined) return;
    clearTimeout(handle);
    this.#timers.delete(handle);
  }

  /** Real time, ms since the epoch. */
  now(): number {
    return Date.now();
  }

  /**
   * Simulated milliseconds since the clock started, a whole number. A job's reported times are
   * differences of these readings, so queue wait, cold start and execution add up exactly to the
   * time from submission to the end.
   */
  simNow(): number {
    return Math.round((Date.now() - this.#epoch) / this.timeScale);
  }

  /**
   * The provider's wall clock at a simulated instant, ms since the Unix epoch: the real start plus
   * the simulated time since. At timeScale 1 it is real time; faster, the provider's days pass in
   * minutes (its billing buckets are on this clock).
   */
  wallAt(simMs: number): number {
    return this.#epoch + simMs;
  }

  /** The simulated instant of a provider wall-clock time (the inverse of wallAt). */
  simAt(wallMs: number): number {
    return wallMs - this.#epoch;
  }

  /** A reading of simNow() as real time, ms since the epoch. */
  realAt(simMs: number): number {
    return this.#epoch + Math.round(simMs * this.timeScale);
  }

  /** A real duration as simulated milliseconds. */
  toSim(realMs: number): number {
    return Math.round(realMs / this.timeScale);
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
