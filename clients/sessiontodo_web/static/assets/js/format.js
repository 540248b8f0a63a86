// How statuses, priorities, sessions and times read: always words or a symbol beside the colour.

export const STATUSES = {
  pending: { icon: '○', text: 'Pending' },
  in_progress: { icon: '◐', text: 'In progress' },
  completed: { icon: '✓', text: 'Completed' },
  cancelled: { icon: '✕', text: 'Cancelled' },
};

export const PRIORITIES = {
  high: { icon: '▲', text: 'High' },
  medium: { icon: '■', text: 'Medium' },
  low: { icon: '▼', text: 'Low' },
};

/** A status or priority as icon and words; one this page has no name for (a newer server's) as its number. */
export function named(table, value, what) {
  return table[value] ?? { icon: '?', text: `${what} ${value}` };
}

export function statusLabel(value) {
  const { icon, text } = named(STATUSES, value, 'Status');
  return `${icon} ${text}`;
}

export function priorityLabel(value) {
  const { icon, text } = named(PRIORITIES, value, 'Priority');
  return `${icon} ${text}`;
}

/** The name a session is shown by: its title label, else its id. */
export function sessionTitle(session) {
  return session.labels.title || session.id;
}

/** Labels shown as chips beside the title (the title is the name already). */
export function shownLabels(session) {
  return Object.entries(session.labels).filter(([key]) => key !== 'title').sort(([a], [b]) => a.localeCompare(b));
}

/** `3/5`: completed of the todos that were not cancelled. */
export function progress(session) {
  const total = session.todo_count - session.cancelled;
  return { done: session.done, total, text: `${session.done}/${total}` };
}

/** Coarse time since `iso` ("just now", "5 min ago"): it reads at a glance and stays put between renders. */
export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const seconds = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

/** The full local date and time, for tooltips and details. */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : '—';
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return 'never expires';
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}
