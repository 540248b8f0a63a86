// The board's event stream: `reset` (the whole board), `change`, `removed` (each with the feed
// cursor as its id) and `feed` (is sessiontodo there?). EventSource reconnects by itself and sends
// the last id it received as Last-Event-ID, so the board resumes right after it: nothing missed,
// nothing twice. If the stream is refused outright (an HTTP error), a new one is opened with
// `?after=` the same id.

const REOPEN_AFTER_MS = 2000;

export class BoardStream {
  /**
   * handlers: onReset(board), onChange(event), onRemoved(event), onFeed(state), onConnection(state)
   * where a connection state is 'live' or 'reconnecting'.
   */
  constructor(handlers) {
    this.handlers = handlers;
    this.lastEventId = '';
    this.source = null;
  }

  open() {
    const url = this.lastEventId ? `/api/events?after=${encodeURIComponent(this.lastEventId)}` : '/api/events';
    const source = new EventSource(url);
    this.source = source;
    const on = (type, handle) =>
      source.addEventListener(type, (message) => {
        if (message.lastEventId) this.lastEventId = message.lastEventId;
        handle(JSON.parse(message.data));
      });
    on('reset', (board) => this.handlers.onReset(board));
    on('change', (event) => this.handlers.onChange(event));
    on('removed', (event) => this.handlers.onRemoved(event));
    on('feed', (status) => {
      this.handlers.onConnection('live');
      this.handlers.onFeed(status.state);
    });
    source.addEventListener('error', () => {
      this.handlers.onConnection('reconnecting');
      if (source.readyState === EventSource.CLOSED) {
        setTimeout(() => this.reopen(), REOPEN_AFTER_MS);
      }
    });
  }

  async reopen() {
    try {
      // A refused stream may mean the sign-in ended: then this goes to the sign-in page instead.
      const response = await fetch('/api/me', { credentials: 'same-origin' });
      if (response.status === 401) {
        location.assign('/login');
        return;
      }
    } catch {
      // The board is still unreachable: the new stream retries like any other.
    }
    this.open();
  }
}
