// search.js: full-text session search in the sidebar
// (GET /api/sessions/search). While the box holds a query, the results
// (title, status, a snippet with the matched words marked) replace the
// workspace groups; a result opens its session; Escape or clearing the
// box brings the groups back.
import { api } from './api.js';
import { h } from './render.js';

const DEBOUNCE_MS = 200;

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : '';
}

function baseName(p) {
  const parts = (p || '').split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : '/';
}

/** initSearch wires the sidebar's search box. */
export function initSearch() {
  const input = document.getElementById('session-search');
  const box = document.getElementById('search-results');
  const nav = document.getElementById('session-nav');
  let timer = null;
  // Only the latest query's answer is drawn: answers can arrive out of order.
  let seq = 0;

  const show = (searching) => {
    box.hidden = !searching;
    nav.hidden = searching;
  };
  const message = (text) => box.replaceChildren(h('p', { class: 'muted small pad', text }));

  const run = async (q) => {
    const mine = ++seq;
    // A query without a letter or digit has nothing to search for (the
    // server would answer SEARCH_INVALID_QUERY): say so without asking.
    if (!/[\p{L}\p{N}]/u.test(q)) {
      message('Type a word to search for.');
      return;
    }
    let res;
    try {
      res = await api.search(q);
    } catch (err) {
      if (mine !== seq) return;
      message(err.code === 'SEARCH_INVALID_QUERY' ? 'Type a word to search for.' : `Search failed: ${err.message}`);
      return;
    }
    if (mine !== seq) return;
    if (!res.results.length) {
      message(`No session matches “${q}”.`);
      return;
    }
    const items = res.results.map((r) => h('li', null, h('a', {
      class: 'search-hit', href: `#/s/${r.id}`, 'data-session': r.id, title: r.cwd,
    },
    h('span', { class: 'sess-title', text: r.title || 'Untitled session' }),
    h('span', { class: 'search-meta', text: `${baseName(r.cwd)} · ${when(r.time)}` }),
    h('span', { class: 'snippet' }, ...r.parts.map((p) => (p.match ? h('mark', { text: p.text }) : p.text))))));
    box.replaceChildren(
      h('p', { class: 'search-count muted small', text: res.results.length === 1 ? '1 session matches' : `${res.results.length} sessions match` }),
      h('ul', { class: 'sess-list', 'aria-label': 'Search results' }, ...items));
  };

  input.addEventListener('input', () => {
    clearTimeout(timer);
    const q = input.value.trim();
    if (!q) {
      seq++;
      show(false);
      return;
    }
    show(true);
    if (!box.childElementCount) message('Searching…');
    timer = setTimeout(() => run(q), DEBOUNCE_MS);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && input.value) {
      e.preventDefault();
      input.value = '';
      input.dispatchEvent(new Event('input'));
    }
  });
}
