// The sessions as a tree (children under their parent), one row each: title, labels, progress,
// what is in progress, last change and its origin. Rows are kept by session id and updated in
// place, so a live change never moves the keyboard focus. Keyboard: the WAI-ARIA tree pattern
// (arrows, Home, End; Enter or Space selects) with one tab stop.

import { el, fill, flash } from './dom.js';
import { STATUSES, ago, progress, sessionTitle, shownLabels, when } from './format.js';

export class SessionTree {
  /** `root` is the `ul[role=tree]`; onSelect(id) is called when a session is chosen, onCount(shown, all) after changes. */
  constructor(root, { onSelect, onCount }) {
    this.root = root;
    this.onSelect = onSelect;
    this.onCount = onCount;
    this.rows = new Map();
    this.selectedId = null;
    this.focusedId = null;
    this.filter = { text: '', label: '' };
    root.addEventListener('keydown', (event) => this.keydown(event));
    root.addEventListener('click', (event) => {
      const item = event.target.closest('[role=treeitem]');
      if (!item) return;
      const row = this.rows.get(item.dataset.sessionId);
      if (event.target.closest('.twisty')) this.expand(row, !row.expanded);
      else this.select(row.session.id, true);
    });
  }

  get(sessionId) {
    return this.rows.get(sessionId)?.session;
  }

  /** Replace every row (the board's `reset`). */
  reset(sessions) {
    this.rows.clear();
    for (const session of sessions) this.paint(this.makeRow(session), session);
    const roots = [];
    for (const row of [...this.rows.values()].sort(byCreation)) {
      const parent = this.rows.get(row.session.parent_id);
      if (parent) parent.group.append(row.item);
      else roots.push(row.item);
    }
    fill(this.root, roots.reverse()); // newest top-level sessions first, children oldest first
    for (const row of this.rows.values()) this.updateGroup(row);
    if (this.selectedId && this.rows.has(this.selectedId)) this.markSelected(this.selectedId);
    this.ensureTabStop();
    this.applyFilter();
  }

  /** Add or update one session's row; whether the set of labels shown may have changed (a new session,
   * or other labels). Updating a row costs the same whatever the number of rows, unless a filter is on. */
  upsert(session) {
    let row = this.rows.get(session.id);
    if (row) {
      const labelsChanged = !sameLabels(row.session.labels, session.labels);
      const changed = session.revision !== row.session.revision;
      this.paint(row, session);
      if (changed) flash(row.item.firstElementChild);
      if (this.filter.text || this.filter.label) this.applyFilter();
      return labelsChanged;
    }
    row = this.makeRow(session);
    this.paint(row, session);
    this.place(row);
    for (const orphan of this.rows.values()) {
      if (orphan.session.parent_id === session.id && orphan.item.parentElement === this.root) this.place(orphan);
    }
    this.applyFilter();
    return true;
  }

  /** Remove a session's row (its children's rows go with it; the feed removes them too). */
  remove(sessionId) {
    const row = this.rows.get(sessionId);
    if (!row) return;
    const parentGroup = row.item.parentElement;
    for (const item of [row.item, ...row.item.querySelectorAll('[role=treeitem]')]) this.rows.delete(item.dataset.sessionId);
    row.item.remove();
    const parent = this.rows.get(row.session.parent_id);
    if (parent && parent.group === parentGroup) this.updateGroup(parent);
    this.ensureTabStop();
    this.applyFilter();
  }

  select(sessionId, focus = false) {
    if (!this.rows.has(sessionId)) return;
    this.markSelected(sessionId);
    if (focus) this.focusItem(this.rows.get(sessionId).item);
    this.onSelect(sessionId);
  }

  setFilter(text, label) {
    this.filter = { text: text.trim().toLowerCase(), label };
    this.applyFilter();
  }

  /** Every `key=value` label but titles, for the label filter. */
  labelPairs() {
    const pairs = new Set();
    for (const { session } of this.rows.values()) {
      for (const [key, value] of shownLabels(session)) pairs.add(`${key}=${value}`);
    }
    return [...pairs].sort((a, b) => a.localeCompare(b));
  }

  refreshTimes(now = Date.now()) {
    for (const row of this.rows.values()) row.parts.time.textContent = ago(row.session.updated_at, now);
  }

  // Rows

  makeRow(session) {
    const parts = {
      twisty: el('span', { class: 'twisty', 'aria-hidden': 'true' }),
      title: el('span', { class: 'title' }),
      labels: el('span', { class: 'labels' }),
      bar: el('progress', { max: '1', value: '0' }),
      count: el('span', { class: 'progress-count' }),
      current: el('span', { class: 'current' }),
      time: el('time', { class: 'ago' }),
      origin: el('span', { class: 'origin' }),
    };
    const line = el(
      'div',
      { class: 'row' },
      parts.twisty,
      parts.title,
      el('span', { class: 'progress' }, parts.bar, parts.count),
      el('span', { class: 'when' }, parts.time, parts.origin),
      (parts.details = el('span', { class: 'details' }, parts.labels, parts.current)),
    );
    const group = el('ul', { role: 'group', hidden: true });
    const item = el('li', { role: 'treeitem', tabindex: '-1', 'aria-selected': 'false', dataset: { sessionId: session.id } }, line, group);
    const row = { item, group, parts, session, painted: null, expanded: true, matched: true };
    this.rows.set(session.id, row);
    return row;
  }

  /** Write a session into its row, touching only what changed (a live board repaints rows all the time). */
  paint(row, session) {
    const before = row.painted;
    row.session = session;
    row.painted = session;
    const { title, labels, bar, count, current, time, origin } = row.parts;
    if (!before || !sameLabels(before.labels, session.labels)) {
      title.textContent = sessionTitle(session);
      title.title = session.labels.title ? `${session.labels.title} (${session.id})` : session.id;
      const chips = shownLabels(session).map(([key, value]) => el('span', { class: 'chip', title: `${key}: ${value}` }, `${key}: ${value}`));
      fill(labels, chips);
    }
    const done = progress(session);
    bar.max = Math.max(done.total, 1);
    bar.value = done.done;
    bar.setAttribute('aria-label', `${done.done} of ${done.total} done`);
    count.textContent = done.text;
    current.textContent = session.current ? `${STATUSES.in_progress.icon} ${session.current}` : '';
    current.title = session.current;
    row.parts.details.classList.toggle('empty', !session.current && labels.childElementCount === 0);
    time.dateTime = session.updated_at ?? '';
    time.textContent = ago(session.updated_at);
    time.title = when(session.updated_at);
    origin.textContent = session.origin ? `by ${session.origin}` : '';
    origin.title = session.origin ? `last changed by ${session.origin}` : '';
    row.item.dataset.revision = session.revision;
  }

  /** Put a row under its parent (or at the top level), in creation order. */
  place(row) {
    const parent = this.rows.get(row.session.parent_id);
    const container = parent ? parent.group : this.root;
    const newestFirst = !parent;
    const before = [...container.children].find((item) => {
      const order = byCreation(row, this.rows.get(item.dataset.sessionId));
      return newestFirst ? order > 0 : order < 0;
    });
    container.insertBefore(row.item, before ?? null);
    if (parent) this.updateGroup(parent);
  }

  updateGroup(row) {
    const hasChildren = row.group.children.length > 0;
    row.group.hidden = !hasChildren || !row.expanded;
    if (hasChildren) row.item.setAttribute('aria-expanded', String(row.expanded));
    else row.item.removeAttribute('aria-expanded');
  }

  expand(row, expanded) {
    row.expanded = expanded;
    this.updateGroup(row);
  }

  markSelected(sessionId) {
    const previous = this.rows.get(this.selectedId);
    if (previous) previous.item.setAttribute('aria-selected', 'false');
    this.selectedId = sessionId;
    this.rows.get(sessionId).item.setAttribute('aria-selected', 'true');
  }

  // Filtering

  applyFilter() {
    const { text, label } = this.filter;
    const active = Boolean(text || label);
    for (const row of this.rows.values()) row.matched = !active || matches(row.session, text, label);
    for (const row of this.rows.values()) row.item.hidden = !row.matched;
    if (active) {
      for (const row of this.rows.values()) {
        if (!row.matched) continue;
        for (let parent = this.rows.get(row.session.parent_id); parent; parent = this.rows.get(parent.session.parent_id)) {
          parent.item.hidden = false; // shown as the path to a match
        }
      }
    }
    for (const row of this.rows.values()) row.item.classList.toggle('context', active && !row.matched && !row.item.hidden);
    this.ensureTabStop();
    this.onCount([...this.rows.values()].filter((row) => row.matched).length, this.rows.size);
  }

  // Keyboard

  visibleItems() {
    return [...this.root.querySelectorAll('[role=treeitem]')].filter((item) => !item.closest('[hidden]'));
  }

  /** Exactly one row is in the tab order: the one last focused, else the selected, else the first shown. */
  ensureTabStop() {
    const visible = this.visibleItems();
    const shown = (sessionId) => visible.find((item) => item.dataset.sessionId === sessionId);
    const stop = shown(this.focusedId) ?? shown(this.selectedId) ?? visible[0];
    for (const item of this.root.querySelectorAll('[role=treeitem][tabindex="0"]')) if (item !== stop) item.tabIndex = -1;
    if (stop) stop.tabIndex = 0;
  }

  focusItem(item) {
    this.focusedId = item.dataset.sessionId;
    for (const other of this.root.querySelectorAll('[role=treeitem][tabindex="0"]')) other.tabIndex = -1;
    item.tabIndex = 0;
    item.focus();
  }

  keydown(event) {
    const item = event.target.closest('[role=treeitem]');
    if (!item || event.altKey || event.ctrlKey || event.metaKey) return;
    const visible = this.visibleItems();
    const index = visible.indexOf(item);
    const row = this.rows.get(item.dataset.sessionId);
    const hasChildren = row.group.children.length > 0;
    switch (event.key) {
      case 'ArrowDown':
        if (index + 1 < visible.length) this.focusItem(visible[index + 1]);
        break;
      case 'ArrowUp':
        if (index > 0) this.focusItem(visible[index - 1]);
        break;
      case 'Home':
        this.focusItem(visible[0]);
        break;
      case 'End':
        this.focusItem(visible[visible.length - 1]);
        break;
      case 'ArrowRight':
        if (hasChildren && !row.expanded) this.expand(row, true);
        else if (hasChildren) this.focusItem(visible[index + 1]);
        break;
      case 'ArrowLeft': {
        const parent = this.rows.get(row.session.parent_id);
        if (hasChildren && row.expanded) this.expand(row, false);
        else if (parent) this.focusItem(parent.item);
        break;
      }
      case 'Enter':
      case ' ':
        this.select(row.session.id, true);
        break;
      default:
        return;
    }
    event.preventDefault();
  }
}

function sameLabels(a, b) {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

function byCreation(a, b) {
  return compare(a.session.created_at ?? '', b.session.created_at ?? '') || compare(a.session.id, b.session.id);
}

function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

function matches(session, text, label) {
  if (label) {
    const [key, ...rest] = label.split('=');
    if (session.labels[key] !== rest.join('=')) return false;
  }
  if (!text) return true;
  return [session.id, ...Object.values(session.labels), session.current].some((field) => field.toLowerCase().includes(text));
}
