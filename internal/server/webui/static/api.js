// api.js: the HTTP API of dsh serve (see docs: /api/openapi.json). The
// browser authenticates with the dsh_token cookie the server set when the
// page was opened with ?token=, so requests carry no header of their own.

/** ApiError carries the server's stable error code. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || `HTTP_${status}`;
  }
}

async function request(method, path, body) {
  const init = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, 'NETWORK', `dsh serve is unreachable (${err.message})`);
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const e = data && data.error;
    throw new ApiError(res.status, e && e.code, e && e.message);
  }
  return data;
}

const enc = encodeURIComponent;

export const api = {
  health: () => request('GET', '/api/health'),
  config: () => request('GET', '/api/config'),
  sessions: (opts = {}) => {
    const q = new URLSearchParams();
    if (opts.children) q.set('children', '1');
    if (opts.workspace) q.set('workspace', opts.workspace);
    const s = q.toString();
    return request('GET', '/api/sessions' + (s ? '?' + s : ''));
  },
  search: (q, limit = 20) => request('GET', `/api/sessions/search?q=${enc(q)}&limit=${limit}`),
  session: (id) => request('GET', `/api/sessions/${enc(id)}`),
  createSession: (body) => request('POST', '/api/sessions', body),
  events: (id, after, limit) => request('GET', `/api/sessions/${enc(id)}/events?after=${after}&limit=${limit}`),
  send: (id, text, delivery, images) => request('POST', `/api/sessions/${enc(id)}/messages`, images && images.length ? { text, delivery, images } : { text, delivery }),
  updateQueue: (id, messageId, op) => request('POST', `/api/sessions/${enc(id)}/queue/${enc(messageId)}`, { op }),
  cancel: (id, clearQueue = false) => request('POST', `/api/sessions/${enc(id)}/cancel`, { clearQueue }),
  answer: (id, approvalId, decision, feedback) =>
    request('POST', `/api/sessions/${enc(id)}/approvals/${enc(approvalId)}`, feedback ? { decision, feedback } : { decision }),
  questions: () => request('GET', '/api/questions'),
  sessionQuestions: (id) => request('GET', `/api/sessions/${enc(id)}/questions`),
  answerQuestion: (id, questionId, body) => request('POST', `/api/sessions/${enc(id)}/questions/${enc(questionId)}`, body),
  setPlanMode: (id, active) => request('POST', `/api/sessions/${enc(id)}/plan`, { active }),
  tree: (id) => request('GET', `/api/sessions/${enc(id)}/tree`),
  fork: (id) => request('POST', `/api/sessions/${enc(id)}/fork`, {}),
  workspaces: () => request('GET', '/api/workspaces'),
  addWorkspace: (path, title) => request('POST', '/api/workspaces', title ? { path, title } : { path }),
  directories: (path) => request('GET', '/api/directories' + (path ? '?path=' + enc(path) : '')),
};

/**
 * Stream follows an SSE URL and keeps following it: EventSource itself
 * reconnects after a dropped connection and sends Last-Event-ID, so the
 * server resumes after the last event seen; when the browser gives up
 * (the server answered an error, e.g. while restarting) Stream opens a
 * new EventSource resuming from the last id it saw, with backoff.
 */
export class Stream {
  /**
   * @param {(lastId: string|null) => string} url the URL for a (re)connect
   * @param {string[]} types the SSE event types to listen to
   * @param {(type: string, data: any, id: string) => void} onEvent
   * @param {(state: 'open'|'retrying'|'closed') => void} onState
   */
  constructor(url, types, onEvent, onState) {
    this.url = url;
    this.types = types;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.lastId = null;
    this.closed = false;
    this.backoff = 250;
    this.timer = null;
    this.open();
  }

  open() {
    if (this.closed) return;
    const es = new EventSource(this.url(this.lastId));
    this.es = es;
    const handle = (ev) => {
      if (ev.lastEventId) this.lastId = ev.lastEventId;
      let data = null;
      try { data = JSON.parse(ev.data); } catch { return; }
      this.onEvent(ev.type, data, ev.lastEventId);
    };
    for (const t of this.types) es.addEventListener(t, handle);
    es.onmessage = handle;
    es.onopen = () => { this.backoff = 250; this.onState('open'); };
    es.onerror = () => {
      if (this.closed) return;
      if (es.readyState === EventSource.CLOSED) {
        this.onState('retrying');
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.open(), this.backoff);
        this.backoff = Math.min(this.backoff * 2, 5000);
      } else {
        this.onState('retrying');
      }
    };
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.onState('closed');
  }
}
