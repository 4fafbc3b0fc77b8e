// panel.js: the side panel's two lists, the subagent tree of the open
// session (rows of GET /api/sessions/{id}/tree, pre-order with depths)
// and its background jobs (the jobs of GET /api/sessions/{id}).
import { h } from './render.js';

/** renderTree draws the open session as the root and its descendants below. */
export function renderTree(el, rows, title, running) {
  if (!rows.length) {
    el.replaceChildren(h('p', { class: 'muted', text: 'No subagents yet.' }));
    return;
  }
  // A plain list with levels in aria-level: links need no tree widget.
  const ul = h('ul', { class: 'tree-list', 'aria-label': 'Subagent tree' });
  ul.append(h('li', { 'aria-level': '1', 'aria-current': 'page', class: 'tree-root' },
    h('span', { class: 'tree-node' }, h('span', { class: `dot ${running ? 'running' : 'idle'}`, 'aria-hidden': 'true' }),
      h('span', { class: 'tree-text' }, h('span', { class: 'tree-label', text: title }), h('span', { class: 'tree-meta', text: 'this session' })))));
  for (const r of rows) {
    ul.append(h('li', { 'aria-level': String(r.depth + 1), 'data-depth': String(r.depth), style: { '--depth': String(r.depth) } },
      h('a', { href: `#/s/${r.id}`, class: 'tree-node', 'data-child': r.id, title: r.id, 'aria-label': `${r.label || r.id}, subagent at depth ${r.depth}` },
        h('span', { class: `dot ${r.activity === 'running' ? 'running' : 'idle'}`, 'aria-hidden': 'true' }),
        h('span', { class: 'tree-text' },
          h('span', { class: 'tree-label', text: r.label || r.id.slice(0, 12) }),
          h('span', { class: 'tree-meta', text: [r.provider, r.mode, r.activity === 'running' ? 'running' : ''].filter(Boolean).join(' · ') }))),
      r.diagnostic ? h('div', { class: 'err-line small', text: `${r.diagnostic}: ${r.reason || ''}` }) : null));
  }
  el.replaceChildren(ul);
}

const JOB_PILL = { running: 'running', stopping: 'awaiting', completed: 'ok', killed: 'rejected', failed: 'error' };

/** renderJobs lists background jobs with their status and summary. */
export function renderJobs(el, jobs) {
  if (!jobs.length) {
    el.replaceChildren(h('p', { class: 'muted', text: 'No background jobs.' }));
    return;
  }
  el.replaceChildren(h('ul', { class: 'job-list' }, ...jobs.map((j) => h('li', { class: 'job', 'data-job': j.id },
    h('div', { class: 'row' }, h('code', { text: j.id }), h('span', { class: 'spacer' }), h('span', { class: `pill ${JOB_PILL[j.status] || ''}`, text: j.status })),
    h('div', { class: 'small job-cmd', text: j.command || j.kind || '' }),
    j.summary ? h('div', { class: 'muted small', text: j.summary }) : null))));
}
