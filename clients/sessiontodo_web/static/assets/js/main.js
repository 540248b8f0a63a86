// The board page: the session tree and the selected session, kept live by the board's stream.

import { request, signIn } from './api.js';
import { DetailPanel } from './detail.js';
import { el, fill, show } from './dom.js';
import { BoardStream } from './stream.js';
import { SessionTree } from './tree.js';

const $ = (id) => document.getElementById(id);
const TIME_REFRESH_MS = 30_000;

const CONNECTION_TEXT = {
  connecting: 'Connecting…',
  live: 'Live',
  loading: 'Waiting for sessiontodo…',
  reconnecting: 'Reconnecting…',
  unreachable: 'sessiontodo is not answering: showing the last known state',
};

const detail = new DetailPanel({
  heading: $('detail-heading'),
  hint: $('detail-hint'),
  body: $('detail-body'),
  meta: $('detail-meta'),
  notice: $('notice'),
  noticeText: $('notice-text'),
  noticeClose: $('notice-close'),
  fields: $('session-fields'),
  todos: $('todos'),
  todosEmpty: $('todos-empty'),
  todoCount: $('todo-count'),
  readyCount: $('ready-count'),
  ownerName: $('owner-name'),
  addForm: $('add-form'),
  addContent: $('add-content'),
  addPriority: $('add-priority'),
  changes: $('changes'),
  changesEmpty: $('changes-empty'),
});

const tree = new SessionTree($('tree'), {
  onSelect(sessionId) {
    history.replaceState(null, '', `#session=${encodeURIComponent(sessionId)}`);
    detail.show(sessionId);
  },
  onCount(shown, all) {
    $('session-count').textContent = shown === all ? `(${all})` : `(${shown} of ${all})`;
    show($('tree-empty'), shown === 0);
  },
});

// The connection line says the worst of: the page's stream to the board, and the board's feed.
let connection = 'connecting';
let feed = 'loading';
function showConnection() {
  const state = connection !== 'live' ? connection : feed;
  $('connection').dataset.state = state;
  $('connection-text').textContent = CONNECTION_TEXT[state];
}

let labelOptions = '';
function refreshLabelFilter() {
  const pairs = tree.labelPairs();
  if (pairs.join('\n') === labelOptions) return;
  labelOptions = pairs.join('\n');
  const select = $('filter-label');
  const chosen = select.value;
  fill(select, el('option', { value: '' }, 'Any label'), pairs.map((pair) => el('option', { value: pair }, pair.replace('=', ': '))));
  select.value = pairs.includes(chosen) ? chosen : '';
}

let firstRender = true;
const stream = new BoardStream({
  onReset(board) {
    tree.reset(board.sessions);
    refreshLabelFilter();
    const wanted = new URLSearchParams(location.hash.slice(1)).get('session');
    if (firstRender && wanted && tree.get(wanted)) tree.select(wanted);
    else detail.onReset(detail.sessionId !== null && tree.get(detail.sessionId) !== undefined);
    if (firstRender) {
      firstRender = false;
      performance.mark('board-rendered');
      document.body.dataset.board = 'ready';
    }
  },
  onChange(event) {
    if (tree.upsert(event.session)) refreshLabelFilter();
    detail.onChange(event);
  },
  onRemoved(event) {
    tree.remove(event.session_id);
    detail.onRemoved(event);
    refreshLabelFilter();
  },
  onFeed(state) {
    feed = state;
    showConnection();
  },
  onConnection(state) {
    connection = state;
    showConnection();
  },
});

const filterText = $('filter-text');
const filterLabel = $('filter-label');
const applyFilter = () => tree.setFilter(filterText.value, filterLabel.value);
filterText.addEventListener('input', applyFilter);
filterLabel.addEventListener('change', applyFilter);

$('sign-out').addEventListener('click', async () => {
  await request('POST', '/logout');
  location.assign('/login');
});

setInterval(() => {
  tree.refreshTimes();
  detail.refreshTimes();
}, TIME_REFRESH_MS);

await signIn();
stream.open();
