/**
 * The retry policy, the same as the Python client's: which errors are transient, and how long to
 * keep trying.
 *
 * Exponential backoff with full jitter (each delay drawn uniformly from zero to its cap, so many
 * clients that failed together do not retry together), bounded by a number of attempts and by an
 * overall deadline. Only UNAVAILABLE is transient: the call never reached a server that could act
 * on it. UNKNOWN, INTERNAL and DEADLINE_EXCEEDED are not (the server may have applied the write,
 * or will fail the same way again), so they are thrown at once.
 */

import { setTimeout as sleep } from "node:timers/promises";

import { Code, ConnectError } from "@connectrpc/connect";

import { ServiceError } from "./errors.js";

/** Whether repeating the same call later can succeed: the service was unreachable, nothing was done. */
export function isTransient(error: unknown): boolean {
  return (error instanceof ServiceError || error instanceof ConnectError) && error.code === Code.Unavailable;
}

export interface RetryOptions {
  /** Tries in all, the first included (1: never retry). Default 5. */
  readonly attempts?: number;
  /** The cap of the first delay, doubled after each failed try. Default 100 ms. */
  readonly initialMs?: number;
  /** The largest cap. Default 2000 ms. */
  readonly maximumMs?: number;
  /** No new try starts this long after the first; null: no deadline. Default 30000 ms. */
  readonly deadlineMs?: number | null;
}

export interface RunOptions {
  /** Which errors are worth another try (default: `isTransient`). */
  readonly retryIf?: (error: unknown) => boolean;
  /** Told before each wait (for logging). */
  readonly onRetry?: (error: unknown, delayMs: number) => void;
}

/** Up to `attempts` tries, full-jitter delays capped at `initialMs * 2**n` and `maximumMs`, within `deadlineMs`. */
export class RetryPolicy {
  readonly attempts: number;
  readonly initialMs: number;
  readonly maximumMs: number;
  readonly deadlineMs: number | null;

  constructor({ attempts = 5, initialMs = 100, maximumMs = 2000, deadlineMs = 30_000 }: RetryOptions = {}) {
    if (!(Number.isInteger(attempts) && attempts >= 1 && initialMs > 0 && maximumMs >= initialMs)) {
      throw new RangeError(`invalid retry policy ${JSON.stringify({ attempts, initialMs, maximumMs })}`);
    }
    if (deadlineMs !== null && !(deadlineMs >= 0)) throw new RangeError(`invalid retry deadline ${deadlineMs}`);
    this.attempts = attempts;
    this.initialMs = initialMs;
    this.maximumMs = maximumMs;
    this.deadlineMs = deadlineMs;
    Object.freeze(this);
  }

  /** The longest delay after failed try number `attempt` (0-based): doubling, at most `maximumMs`. */
  cap(attempt: number): number {
    return Math.min(this.initialMs * 2 ** Math.min(attempt, 30), this.maximumMs);
  }

  /** A delay after failed try number `attempt`: uniform between 0 and `cap(attempt)` (full jitter). */
  delay(attempt: number): number {
    return Math.random() * this.cap(attempt);
  }

  /**
   * Await `call()` until it succeeds; rethrow its error when `retryIf` says no, when the attempts
   * are used up, or when the next try would start after the deadline. A try in flight is never
   * cancelled: each call carries its own timeout.
   */
  async run<T>(call: () => Promise<T>, { retryIf = isTransient, onRetry }: RunOptions = {}): Promise<T> {
    const giveUpAt = this.deadlineMs === null ? Infinity : performance.now() + this.deadlineMs;
    for (let attempt = 0; ; ) {
      try {
        return await call();
      } catch (error) {
        const delayMs = this.delay(attempt);
        attempt += 1;
        if (attempt >= this.attempts || !retryIf(error) || performance.now() + delayMs > giveUpAt) throw error;
        onRetry?.(error, delayMs);
        await sleep(delayMs);
      }
    }
  }
}

/** The policy a client uses unless given one. */
export const DEFAULT_RETRY = new RetryPolicy();
