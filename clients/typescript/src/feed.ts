/**
 * Where a resuming feed stands, without I/O: which request reopens it, and whether its consumer
 * must be told to forget what it holds. `TodoClient.watchChanges` drives it; the same state
 * machine as the Python client's `watch_changes`.
 *
 * Resuming after a cursor delivers exactly the messages after it. A snapshot carries no cursors
 * until its closing PROGRESS bookmark, so a snapshot cut short cannot be resumed: the feed asks
 * for a whole new one and announces it with a RESET marker (empty session id), as the server
 * does when it resets a feed itself.
 */

import type { ChangeKind, FeedEvent } from "./models.js";

/** The RESET marker: forget every session held, a fresh snapshot follows. */
export const RESET_MARKER: FeedEvent = Object.freeze({
  sessionId: "",
  kind: "reset",
  revision: 0n,
  todoId: "",
  todos: [],
  origin: "",
  cursor: "",
});

export class FeedPosition {
  /** The cursor of the last message with one; "" before any. */
  cursor: string;
  /** Whether the next request asks for a snapshot (only without a cursor). */
  snapshot: boolean;
  /** Whether a snapshot (or a reset) started and its bookmark has not come yet. */
  inSnapshot = false;

  constructor(afterCursor: string, includeSnapshot: boolean) {
    this.cursor = afterCursor;
    this.snapshot = includeSnapshot && afterCursor === "";
  }

  /** A message of a kind this client does not know: skipped, its cursor kept. */
  skipped(cursor: string): void {
    if (cursor !== "") this.moved(cursor);
  }

  /** A message delivered to the consumer. */
  delivered(kind: ChangeKind, cursor: string): void {
    this.inSnapshot = kind === "snapshot" || kind === "reset" || (this.inSnapshot && cursor === "");
    if (cursor !== "") this.moved(cursor);
  }

  /** The stream broke: the marker to yield before reopening, if a snapshot was cut short. */
  interrupted(): FeedEvent | undefined {
    if (!this.inSnapshot) return undefined;
    this.cursor = "";
    this.snapshot = true;
    return RESET_MARKER;
  }

  private moved(cursor: string): void {
    this.cursor = cursor;
    this.snapshot = false;
  }
}
