/**
 * Calls wait for a starting server: the connection must open within the call's deadline.
 *
 * connect-node fails a call at once when its connection cannot open, so a client started a moment
 * before its server, or calling during a restart, spent its retries in a second and a half.
 * `ConnectionReadiness.ready` instead waits for the connection to open (what gRPC's
 * `waitForReady` does), within the call's own timeout, and tells once that it waits, so a restart
 * inside the deadline costs no error. A connection that does not open in time is `NotReady`, an
 * `Unavailable`: nothing was sent, so the caller may try again; the client's own retry policy does
 * not, since the wait already spent the call's time. The same rule as the Python client's.
 */

import { setTimeout as sleep } from "node:timers/promises";

import { Code } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";

import { Unavailable } from "./errors.js";

/** The connection did not open within the call's timeout: the call was never sent. */
export class NotReady extends Unavailable {}

/** The pause between two attempts to open the connection while the server is not there. */
const RECONNECT_DELAY_MS = 100;

/** Waits for one connection to open, and says once per outage that calls are waiting for it. */
export class ConnectionReadiness {
  private told = false;

  constructor(
    private readonly sessions: Http2SessionManager,
    private readonly server: string,
    private readonly tell: (line: string) => void,
  ) {}

  /** Resolves once the connection is open, with the whole milliseconds left of `timeoutMs` (at least 1); throws `NotReady` when it does not open in time. */
  async ready(timeoutMs: number): Promise<number> {
    const giveUpAt = performance.now() + timeoutMs;
    for (;;) {
      const state = await this.connect(giveUpAt - performance.now());
      if (state === "open" || state === "idle") {
        this.told = false;
        return Math.max(Math.floor(giveUpAt - performance.now()), 1); // grpc-timeout is a whole number
      }
      if (state === "timeout" || performance.now() + RECONNECT_DELAY_MS > giveUpAt) {
        throw new NotReady(Code.Unavailable, `${this.server} did not accept a connection within ${timeoutMs / 1000}s`);
      }
      if (!this.told) {
        this.told = true;
        this.tell(`${this.server} does not accept connections yet: calls wait up to ${timeoutMs / 1000}s each for it`);
      }
      await sleep(RECONNECT_DELAY_MS);
    }
  }

  /** One attempt to open the connection, given up after `leftMs` (a host that drops packets never answers). */
  private async connect(leftMs: number): Promise<"open" | "idle" | "error" | "timeout"> {
    if (leftMs <= 0) return "timeout";
    const timer = new AbortController();
    try {
      return await Promise.race([this.sessions.connect(), sleep(leftMs, "timeout" as const, { signal: timer.signal })]);
    } finally {
      timer.abort();
    }
  }
}
