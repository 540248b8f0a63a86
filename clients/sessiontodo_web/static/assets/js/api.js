// The board's JSON API: every write carries the CSRF token of this sign-in; a 401 goes to sign-in.

let csrfToken = '';

/** An answer other than 2xx: `status`, and the body (`{name, data: {message}}`, a 409's `current`). */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.data?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** Read this sign-in's CSRF token; sends the browser to sign in when there is none. */
export async function signIn() {
  const me = await request('GET', '/api/me');
  csrfToken = me.csrf_token;
}

export async function request(method, path, body) {
  const headers = { 'x-csrf-token': csrfToken };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  if (response.status === 401) {
    location.assign('/login');
    throw new ApiError(401, null);
  }
  const answer = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, answer);
  return answer;
}

export const sessionPath = (sessionId) => `/api/sessions/${encodeURIComponent(sessionId)}`;
export const todoPath = (sessionId, todoId) => `${sessionPath(sessionId)}/todos/${encodeURIComponent(todoId)}`;
