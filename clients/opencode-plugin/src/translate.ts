/**
 * Pure conversions from OpenCode's values to sessiontodo's, the same as the Python gateways'
 * (`sessiontodo_opencode.translate`), so a list stored here reads back alike through them.
 *
 * OpenCode's four statuses and three priorities are sessiontodo's. Any other word (OpenCode
 * stores what the model wrote) is kept in the todo's metadata under `opencode.status` /
 * `opencode.priority`, beside the stand-in pending / medium.
 */

import type { NewTodo, TodoPriority, TodoStatus } from "@sessiontodo/client";

/** A todo as OpenCode's `todo.updated` carries it. */
export interface OpenCodeTodo {
  readonly content: string;
  readonly status: string;
  readonly priority: string;
}

/** The parts of OpenCode's Session the plugin stores. */
export interface OpenCodeSession {
  readonly id: string;
  readonly title: string;
  readonly directory: string;
  readonly projectID: string;
  readonly parentID?: string;
}

export const STATUS_KEY = "opencode.status";
export const PRIORITY_KEY = "opencode.priority";
/** Characters of a title kept in its label (far below the service's label limit). */
export const MAX_TITLE = 1024;

const STATUSES: ReadonlySet<string> = new Set<TodoStatus>(["pending", "in_progress", "completed", "cancelled"]);
const PRIORITIES: ReadonlySet<string> = new Set<TodoPriority>(["high", "medium", "low"]);

export function todoToService(todo: OpenCodeTodo): NewTodo {
  const metadata: Record<string, string> = {};
  if (!STATUSES.has(todo.status)) metadata[STATUS_KEY] = todo.status;
  if (!PRIORITIES.has(todo.priority)) metadata[PRIORITY_KEY] = todo.priority;
  return {
    content: todo.content,
    status: STATUSES.has(todo.status) ? (todo.status as TodoStatus) : "pending",
    priority: PRIORITIES.has(todo.priority) ? (todo.priority as TodoPriority) : "medium",
    metadata,
  };
}

/** The labels a session carries in sessiontodo: title, directory and project, as the mirror sets them. */
export function sessionLabels(session: OpenCodeSession): Record<string, string> {
  return { title: session.title.slice(0, MAX_TITLE), directory: session.directory, project: session.projectID };
}
