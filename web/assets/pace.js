// Paced work: what a page does again when something changes (read a run again, forecast it,
// read the fleet), one at a time and no more often than the work allows. At 100,000 members a
// run's status is 15 MB and the fleet 100 pages: done at every event, it would keep the daemon
// and the page busy with nothing else.

/**
 * `task`, run when `soon()` is called: `wait` ms after it (a burst of calls runs it once),
 * never two at once (a call while one is planned or under way asks for one more after it, never
 * lost), and each starting at least `every` ms, and `factor` times as long as the last one
 * took, after the last one started.
 */
export class Paced {
  /**
   * @param {() => Promise<void>} task
   * @param {{ wait: number, every: number, factor: number }} pace
   */
  constructor(task, pace) {
    this.task = task;
    this.wait = pace.wait;
    this.every = pace.every;
    this.factor = pace.factor;
    this.timer = 0;
    this.running = false;
    this.again = false;
    this.stopped = false;
    /** When the last run started, and how long it took (ms). */
    this.startedAt = 0;
    this.took = 0;
  }

  /** Asks for a run. */
  soon() {
    if (this.stopped) return;
    if (this.timer || this.running) {
      this.again = true;
      return;
    }
    this.again = false;
    const gap = Math.max(this.every, this.factor * this.took);
    this.timer = window.setTimeout(() => void this.run(), Math.max(this.wait, this.startedAt + gap - Date.now()));
  }

  /** Runs the task now (the first time, awaited by the page), timed like any other run. */
  async run() {
    this.timer = 0;
    this.running = true;
    this.again = false;
    this.startedAt = Date.now();
    try {
      await this.task();
    } finally {
      this.took = Date.now() - this.startedAt;
      this.running = false;
      if (this.again) this.soon();
    }
  }

  /** No more runs (the page was left). */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
