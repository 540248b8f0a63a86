// The selected session: its todos (status and priority as colour and words), who works on each and
// what each waits for ("blocked by #3"), metadata on demand, recent changes, and the edits. Every
// edit sends the revision shown; when someone else changed the list first the board answers 409
// with the list as it is now, which replaces the one shown. Claims send no revision: a claim is
// atomic, and a refused one (taken, blocked) answers 409 with the reason and the list now.

import { ApiError, request, sessionPath, todoPath } from './api.js';
import { el, fill, flash, show } from './dom.js';
import { PRIORITIES, STATUSES, ago, duration, sessionTitle, when } from './format.js';

const LABEL_TEXT_LENGTH = 60;
const OWNER_KEY = 'sessiontodo.owner';

export class DetailPanel {
  /** `parts`: the elements of index.html's detail section, by name. */
  constructor(parts) {
    this.parts = parts;
    this.sessionId = null;
    this.detail = null;
    this.early = [];
    this.removed = false;
    this.rows = new Map();
    fill(parts.addPriority, optionsOf(PRIORITIES));
    parts.addPriority.value = 'medium';
    parts.addForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.add();
    });
    parts.noticeClose.addEventListener('click', () => show(parts.notice, false));
    parts.ownerName.value = localStorage.getItem(OWNER_KEY) ?? '';
    parts.ownerName.addEventListener('change', () => localStorage.setItem(OWNER_KEY, parts.ownerName.value.trim()));
  }

  /** Select a session: read its list and changes from the board. */
  async show(sessionId) {
    this.sessionId = sessionId;
    this.detail = null;
    this.early = []; // changes that arrive while the list is being read: applied after it if newer
    this.removed = false;
    this.rows.clear();
    fill(this.parts.todos);
    show(this.parts.notice, false);
    show(this.parts.hint, false);
    show(this.parts.body, true);
    this.parts.body.classList.remove('gone');
    try {
      const detail = await request('GET', sessionPath(sessionId));
      if (this.sessionId !== sessionId) return;
      this.render(detail);
      for (const event of this.early.splice(0)) this.onChange(event);
    } catch (error) {
      if (this.sessionId !== sessionId) return;
      if (error.status === 404) this.gone('This session does not exist (any more).');
      else this.notify(error.message, 'error');
    }
  }

  onChange(event) {
    if (event.session.id !== this.sessionId) return;
    if (!this.detail) {
      this.early.push(event);
      return;
    }
    if (event.session.revision <= this.detail.session.revision) return;
    const before = new Map(this.detail.todos.map((todo) => [todo.id, todo]));
    this.render({ session: event.session, todos: event.todos, changes: [...this.detail.changes, event.change] });
    for (const todo of event.todos) {
      const was = before.get(todo.id);
      const changed = !was || ['content', 'status', 'priority'].some((field) => was[field] !== todo[field]);
      if (changed) flash(this.rows.get(todo.id).item);
    }
  }

  onRemoved(event) {
    if (!this.detail || event.session_id !== this.sessionId) return;
    this.detail.changes.push(event.change);
    this.renderChanges();
    this.gone(event.change.summary === 'session expired' ? 'This session expired.' : 'This session was removed.');
  }

  /** After a `reset` the list may have changed in any way: read it again (or say it is gone). */
  onReset(stillThere) {
    if (this.sessionId === null) return;
    if (stillThere) this.show(this.sessionId);
    else this.gone('This session no longer exists.');
  }

  refreshTimes() {
    if (this.detail) {
      this.renderMeta();
      this.renderChanges();
    }
  }

  // Rendering

  render(detail) {
    this.detail = { ...detail, changes: uniqueChanges(detail.changes) };
    const { session, todos } = this.detail;
    this.parts.heading.textContent = sessionTitle(session);
    this.renderMeta();
    this.renderFields();
    this.renderTodos(todos);
    this.renderChanges();
  }

  renderMeta() {
    const { session } = this.detail;
    const origin = session.origin ? ` by ${session.origin}` : '';
    this.parts.meta.textContent = `${session.id} · revision ${session.revision} · changed ${ago(session.updated_at)}${origin}`;
  }

  renderFields() {
    const { session } = this.detail;
    const fields = [
      ['Session id', session.id],
      ['Parent', session.parent_id || '—'],
      ['Revision', String(session.revision)],
      ['Created', when(session.created_at)],
      ['Last change', when(session.updated_at)],
      ['Last origin', session.origin || '—'],
      ['Idle TTL', duration(session.idle_ttl)],
      ...Object.entries(session.labels).sort(([a], [b]) => a.localeCompare(b)).map(([key, value]) => [`Label ${key}`, value]),
    ];
    fill(this.parts.fields, fields.map(([name, value]) => [el('dt', {}, name), el('dd', {}, value)]));
  }

  renderTodos(todos) {
    const focused = document.activeElement;
    const list = this.parts.todos;
    const seen = new Set();
    todos.forEach((todo, index) => {
      const row = this.rows.get(todo.id) ?? this.makeRow(todo);
      this.paintRow(row, todo, index, todos);
      if (list.children[index] !== row.item) list.insertBefore(row.item, list.children[index] ?? null);
      seen.add(todo.id);
    });
    for (const [todoId, row] of this.rows) {
      if (!seen.has(todoId)) {
        row.item.remove();
        this.rows.delete(todoId);
      }
    }
    if (focused instanceof HTMLElement && focused.isConnected && document.activeElement !== focused) focused.focus();
    const done = todos.filter((todo) => todo.status === 'completed').length;
    this.parts.todoCount.textContent = `${done}/${todos.filter((todo) => todo.status !== 'cancelled').length}`;
    const ready = todos.filter((todo) => todo.ready).length;
    this.parts.readyCount.textContent = ready ? `· ${ready} ready` : '';
    show(this.parts.todosEmpty, todos.length === 0);
  }

  renderChanges() {
    const changes = this.detail.changes.slice(-50).reverse();
    fill(
      this.parts.changes,
      changes.map((change) =>
        el(
          'li',
          {},
          el('span', { class: 'rev' }, `r${change.revision}`),
          ' ',
          el('span', { class: 'origin' }, change.origin || '—'),
          ' ',
          el('time', { datetime: change.time ?? '', title: when(change.time) }, ago(change.time)),
          ' ',
          el('span', { class: 'summary' }, change.summary),
        ),
      ),
    );
    show(this.parts.changesEmpty, changes.length === 0);
  }

  makeRow(todo) {
    const row = {
      status: el('select', { class: 'status' }, optionsOf(STATUSES)),
      priority: el('select', { class: 'priority' }, optionsOf(PRIORITIES)),
      content: el('span', { class: 'content' }),
      edit: el('button', { type: 'button', class: 'quiet' }, 'Edit'),
      up: el('button', { type: 'button', class: 'quiet' }, '↑'),
      down: el('button', { type: 'button', class: 'quiet' }, '↓'),
      remove: el('button', { type: 'button', class: 'quiet danger' }, 'Remove'),
      claim: el('button', { type: 'button', class: 'quiet claim' }, 'Claim'),
      release: el('button', { type: 'button', class: 'quiet release' }, 'Release'),
      owner: el('span', { class: 'owner' }),
      readyBadge: el('span', { class: 'ready-badge' }, 'ready'),
      blockers: el('span', { class: 'blockers' }),
      link: el('select', { class: 'link' }),
      metadataSummary: el('summary'),
      metadataFields: el('dl'),
      form: null,
      todo,
    };
    row.metadata = el('details', { class: 'metadata' }, row.metadataSummary, row.metadataFields);
    row.item = el(
      'li',
      { class: 'todo', dataset: { todoId: todo.id } },
      el('div', { class: 'todo-main' }, row.status, row.priority, row.content, el('span', { class: 'actions' }, row.claim, row.release, row.edit, row.up, row.down, row.remove)),
      el('div', { class: 'todo-graph' }, row.readyBadge, row.owner, row.blockers, row.link),
      row.metadata,
    );
    row.status.addEventListener('change', () => this.update(row, { status: row.status.value }));
    row.priority.addEventListener('change', () => this.update(row, { priority: row.priority.value }));
    row.edit.addEventListener('click', () => this.startEditing(row));
    row.up.addEventListener('click', () => this.move(row.todo.id, -1));
    row.down.addEventListener('click', () => this.move(row.todo.id, 1));
    row.remove.addEventListener('click', () => this.edit('DELETE', todoPath(this.sessionId, row.todo.id), {}));
    row.claim.addEventListener('click', () => this.claim(row));
    // Release gives the todo back whoever holds it: a person frees what a stopped agent left claimed.
    row.release.addEventListener('click', () => this.edit('POST', `${todoPath(this.sessionId, row.todo.id)}/release`, { owner: row.todo.owner }, null));
    row.link.addEventListener('change', () => {
      const blocker = row.link.value;
      row.link.value = '';
      if (blocker) this.update(row, { add_blocked_by: [blocker] });
    });
    this.rows.set(todo.id, row);
    return row;
  }

  paintRow(row, todo, index, todos) {
    const count = todos.length;
    row.todo = todo;
    const name = shortened(todo.content);
    row.item.dataset.status = todo.status;
    row.item.dataset.priority = todo.priority;
    choose(row.status, todo.status, 'Status');
    choose(row.priority, todo.priority, 'Priority');
    row.status.setAttribute('aria-label', `Status of “${name}”`);
    row.priority.setAttribute('aria-label', `Priority of “${name}”`);
    row.edit.setAttribute('aria-label', `Edit “${name}”`);
    row.up.setAttribute('aria-label', `Move “${name}” up`);
    row.down.setAttribute('aria-label', `Move “${name}” down`);
    row.remove.setAttribute('aria-label', `Remove “${name}”`);
    row.claim.setAttribute('aria-label', `Claim “${name}”`);
    row.release.setAttribute('aria-label', `Release “${name}”`);
    row.link.setAttribute('aria-label', `Make “${name}” wait for another todo`);
    this.paintGraph(row, todo, todos);
    row.up.disabled = index === 0;
    row.down.disabled = index === count - 1;
    if (!row.form) row.content.textContent = todo.content;
    const metadata = Object.entries(todo.metadata).sort(([a], [b]) => a.localeCompare(b));
    show(row.metadata, metadata.length > 0);
    row.metadataSummary.textContent = `Metadata (${metadata.length})`;
    fill(row.metadataFields, metadata.map(([key, value]) => [el('dt', {}, key), el('dd', {}, value)]));
  }

  /** Who works on the todo, whether it is ready, what it waits for (each blocker by its number in the list,
   * struck when finished, with a button to stop waiting for it), and the choice of a todo to wait for. */
  paintGraph(row, todo, todos) {
    const numbers = new Map(todos.map((other, position) => [other.id, position + 1]));
    const byId = new Map(todos.map((other) => [other.id, other]));
    const name = shortened(todo.content);
    row.item.dataset.ready = String(todo.ready);
    row.item.dataset.owner = todo.owner;
    show(row.readyBadge, todo.ready);
    show(row.claim, todo.ready);
    show(row.release, todo.owner !== '');
    show(row.owner, todo.owner !== '');
    row.owner.textContent = todo.owner ? `● ${todo.owner}` : '';
    row.owner.title = todo.lease_expires_at ? `claim lapses ${when(todo.lease_expires_at)} unless renewed` : '';
    const chips = todo.blocked_by.map((blocker) => {
      const number = numbers.has(blocker) ? `#${numbers.get(blocker)}` : blocker;
      const finished = ['completed', 'cancelled'].includes(byId.get(blocker)?.status);
      const unlink = el('button', { type: 'button', class: 'quiet unlink', 'aria-label': `Stop “${name}” waiting for ${number}` }, '×');
      unlink.addEventListener('click', () => this.update(row, { remove_blocked_by: [blocker] }));
      return el('span', { class: finished ? 'blocker finished' : 'blocker', dataset: { blocker } }, el('span', { class: 'ref' }, number), unlink);
    });
    fill(row.blockers, chips.length ? ['blocked by ', ...chips] : []);
    show(row.blockers, chips.length > 0);
    const choices = todos
      .filter((other) => other.id !== todo.id && !todo.blocked_by.includes(other.id))
      .map((other) => el('option', { value: other.id }, `#${numbers.get(other.id)} ${shortened(other.content)}`));
    if (row.link !== document.activeElement) fill(row.link, el('option', { value: '' }, 'Wait for…'), choices);
    show(row.link, choices.length > 0);
  }

  claim(row) {
    const owner = this.parts.ownerName.value.trim();
    if (!owner) {
      this.notify('Type your name in “Claim as” first: a claim says who works on the todo.', 'error');
      this.parts.ownerName.focus();
      return false;
    }
    localStorage.setItem(OWNER_KEY, owner);
    return this.edit('POST', `${todoPath(this.sessionId, row.todo.id)}/claim`, { owner }, null);
  }

  gone(message) {
    this.removed = true;
    this.parts.body.classList.add('gone');
    this.notify(message, 'gone');
  }

  notify(message, kind) {
    this.parts.notice.dataset.kind = kind;
    this.parts.noticeText.textContent = message;
    show(this.parts.notice, true);
  }

  // Editing

  /** Edit a todo's text in place, in a box that grows with the text (Enter saves, Shift+Enter is a new
   * line, Escape cancels). The edit is of the list as it was when it started: if someone else changes
   * the list meanwhile, saving is a conflict rather than a silent overwrite, and the box stays open with
   * what was typed, to save again over the list as it is now. */
  startEditing(row) {
    let startedAt = this.detail.session.revision;
    const input = el('textarea', { class: 'edit', rows: '1', maxlength: '4096', 'aria-label': `Text of “${shortened(row.todo.content)}”` });
    input.value = row.todo.content;
    const fit = () => {
      input.style.height = 'auto';
      input.style.height = `${input.scrollHeight + input.offsetHeight - input.clientHeight}px`; // borders too
    };
    const cancel = el('button', { type: 'button', class: 'quiet' }, 'Cancel');
    row.form = el('form', { class: 'edit-form' }, input, el('button', { type: 'submit' }, 'Save'), cancel);
    const stop = () => {
      row.form.replaceWith(row.content);
      row.form = null;
      row.content.textContent = row.todo.content;
      row.edit.focus();
    };
    row.form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const content = input.value;
      if (!content.trim() || content === row.todo.content) return stop();
      if (await this.update(row, { content }, startedAt)) return stop();
      if (row.form?.isConnected && this.parts.notice.dataset.kind === 'conflict') {
        startedAt = this.detail.session.revision; // seen now: saving again writes over this list
        this.parts.noticeText.textContent += ' What you typed is kept: save it again to apply it.';
        input.focus();
      }
    });
    cancel.addEventListener('click', stop);
    input.addEventListener('input', fit);
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        stop();
      } else if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        row.form.requestSubmit();
      }
    });
    row.content.replaceWith(row.form);
    fit();
    input.focus();
    input.select();
  }

  update(row, change, expectedRevision) {
    return this.edit('PATCH', todoPath(this.sessionId, row.todo.id), change, expectedRevision);
  }

  move(todoId, delta) {
    const order = this.detail.todos.map((todo) => todo.id);
    const from = order.indexOf(todoId);
    const to = from + delta;
    if (from < 0 || to < 0 || to >= order.length) return;
    [order[from], order[to]] = [order[to], order[from]];
    return this.edit('PUT', `${sessionPath(this.sessionId)}/order`, { todo_ids: order });
  }

  async add() {
    const input = this.parts.addContent;
    const added = await this.edit('POST', `${sessionPath(this.sessionId)}/todos`, {
      content: input.value,
      priority: this.parts.addPriority.value,
    });
    if (added) input.value = '';
  }

  /** Send one edit with the revision shown (or given; null: none, for claims); show the answer, or the list as
   * it is now on a conflict or a refused claim. */
  async edit(method, path, body, expectedRevision = this.detail?.session.revision) {
    if (!this.detail || this.removed) return false;
    const sessionId = this.sessionId;
    this.parts.todos.setAttribute('aria-busy', 'true');
    try {
      const payload = expectedRevision === null ? body : { ...body, expected_revision: expectedRevision };
      const detail = await request(method, path, payload);
      if (this.sessionId !== sessionId) return true;
      show(this.parts.notice, false);
      if (detail.session.revision >= this.detail.session.revision) this.render(detail);
      return true;
    } catch (error) {
      if (this.sessionId !== sessionId) return false;
      if (error instanceof ApiError && error.status === 409 && error.body?.name === 'ClaimRefusedError' && error.body.current) {
        this.render(error.body.current);
        this.notify(error.message, 'conflict');
      } else if (error instanceof ApiError && error.status === 409 && error.body?.current) {
        const current = error.body.current;
        this.render(current);
        const by = current.session.origin ? ` by ${current.session.origin}` : '';
        this.notify(
          `Someone else changed this list (now revision ${current.session.revision}${by}), so your change was not made. ` +
            'This is the list as it is now.',
          'conflict',
        );
      } else {
        this.notify(error.message, 'error');
      }
      return false;
    } finally {
      this.parts.todos.removeAttribute('aria-busy');
    }
  }
}

function optionsOf(table) {
  return Object.entries(table).map(([value, { icon, text }]) => el('option', { value }, `${icon} ${text}`));
}

/** Select `value`, adding an option for a value this page has no name for (a newer server's). */
function choose(select, value, what) {
  const key = String(value);
  if (![...select.options].some((option) => option.value === key)) select.append(el('option', { value: key }, `? ${what} ${key}`));
  select.value = key;
}

function shortened(text) {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > LABEL_TEXT_LENGTH ? `${flat.slice(0, LABEL_TEXT_LENGTH - 1)}…` : flat;
}

function uniqueChanges(changes) {
  const byRevision = new Map(changes.map((change) => [change.revision, change]));
  return [...byRevision.values()].sort((a, b) => a.revision - b.revision);
}
