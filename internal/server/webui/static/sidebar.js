// sidebar.js: sessions grouped by workspace, with live status from the
// host feed (/api/events).
import { h, isSubagent } from './render.js';

function ago(ms) {
  if (!ms) return '';
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

function baseName(p) {
  const parts = (p || '').split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : '/';
}

const GROUP_LIMIT = 25;

/** statusOf is the live status the sidebar shows for a session. */
export function statusOf(state, s) {
  if (state.pendingBySession.has(s.header.id) && state.pendingBySession.get(s.header.id).size) return 'awaiting-approval';
  if (state.questionsBySession.has(s.header.id) && state.questionsBySession.get(s.header.id).size) return 'awaiting-answer';
  return state.statusBySession.get(s.header.id) || s.status || 'idle';
}

/** renderSidebar redraws the workspace groups. */
export function renderSidebar(state) {
  const nav = document.getElementById('session-nav');
  const top = state.sessions.filter((s) => !isSubagent(s));
  const groups = [];
  const placed = new Set();
  for (const w of state.workspaces || []) {
    const inWs = top.filter((s) => s.header.cwd === w.path);
    const order = new Map((w.sessionIds || []).map((id, i) => [id, i]));
    inWs.sort((a, b) => (order.get(a.header.id) ?? -1) - (order.get(b.header.id) ?? -1) || b.updatedAt - a.updatedAt);
    inWs.forEach((s) => placed.add(s.header.id));
    groups.push({ title: w.title || baseName(w.path), path: w.path, missing: w.status === 'missing-dir', sessions: inWs });
  }
  const byCwd = new Map();
  for (const s of top) {
    if (placed.has(s.header.id)) continue;
    if (!byCwd.has(s.header.cwd)) byCwd.set(s.header.cwd, []);
    byCwd.get(s.header.cwd).push(s);
  }
  for (const [cwd, list] of byCwd) groups.push({ title: baseName(cwd), path: cwd, sessions: list });
  const nodes = groups.map((g) => {
    // Long histories stay cheap: the newest sessions first, the rest on request.
    const all = g.sessions;
    const shown = state.expanded.has(g.path) ? all : all.slice(0, GROUP_LIMIT);
    if (all.some((s) => s.header.id === state.currentId) && !shown.some((s) => s.header.id === state.currentId)) {
      shown.push(all.find((s) => s.header.id === state.currentId));
    }
    const list = h('ul', { class: 'sess-list' }, ...shown.map((s) => {
      const st = statusOf(state, s);
      const active = s.header.id === state.currentId;
      return h('li', null, h('a', {
        class: 'sess' + (active ? ' active' : ''), href: `#/s/${s.header.id}`, 'aria-current': active ? 'page' : null,
        'data-session': s.header.id, title: s.title || s.header.id,
      },
      h('span', { class: `dot ${st}`, role: 'img', 'aria-label': st }),
      h('span', { class: 'sess-title', text: s.title || 'Untitled session' }, s.header.parentSession ? h('span', { class: 'fork-mark', text: 'fork' }) : null),
      h('span', { class: 'sess-meta', text: st === 'awaiting-approval' ? 'needs approval' : st === 'awaiting-answer' ? 'needs your answer' : st === 'running' ? 'running…' : ago(s.updatedAt) })));
    }));
    if (!g.sessions.length) list.append(h('li', { class: 'muted small pad', text: 'No sessions yet' }));
    if (all.length > shown.length) {
      list.append(h('li', null, h('button', {
        type: 'button', class: 'btn ghost small more', text: `Show ${all.length - shown.length} more`,
        onclick: () => { state.expanded.add(g.path); renderSidebar(state); },
      })));
    }
    return h('section', { class: 'ws-group' },
      h('h2', { class: 'ws-title', title: g.path }, h('span', { text: g.title }), g.missing ? h('span', { class: 'pill error small', text: 'missing' }) : null),
      list);
  });
  if (!nodes.length) nodes.push(h('p', { class: 'muted pad', text: 'No sessions yet. Start one with “New session”.' }));
  nav.replaceChildren(...nodes);
}
