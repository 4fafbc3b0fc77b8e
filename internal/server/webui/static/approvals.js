// approvals.js: the approval panel. A tool call waiting for the person
// (approval/asked in the log, approval/pending on the host feed) shows
// what it would do; Allow once or Reject (with feedback) answers it.
import { api } from './api.js';
import { h, diffView, proposedDiff } from './render.js';

const $ = (id) => document.getElementById(id);

// pendingApprovals: what the log says is asked and not decided, joined
// with the host's queue (which holds the id to answer with).
export function pendingApprovals(view, state) {
  const host = state.pendingBySession.get(view.id) || new Map();
  const out = [];
  const seen = new Set();
  for (const a of view.model.pending()) {
    const hostA = [...host.values()].find((x) => x.callId === a.callId) || host.get(a.id);
    out.push({ ...a, answerId: hostA ? hostA.id : a.id, host: hostA });
    seen.add(a.callId);
  }
  for (const a of host.values()) {
    const decided = [...view.model.approvals.values()].some((x) => x.callId === a.callId && x.decided);
    if (!seen.has(a.callId) && !decided) out.push({ id: a.id, answerId: a.id, callId: a.callId, toolName: a.toolName, reason: a.reason, command: a.command, cwd: a.cwd, host: a });
  }
  return out;
}

export function paintApprovals(view, state, toast) {
  const panel = $('approval');
  const list = pendingApprovals(view, state);
  if (!list.length) {
    const hadFocus = panel.contains(document.activeElement);
    panel.hidden = true;
    panel.replaceChildren();
    if (hadFocus && !$('composer').hidden) $('composer-input').focus();
    return;
  }
  const a = list[0];
  // Rebuilt only when what it shows changes, so a half-typed rejection
  // survives unrelated redraws.
  const key = `${a.answerId}:${list.length}`;
  if (panel.dataset.key === key && !panel.hidden) return;
  panel.dataset.key = key;
  panel.dataset.approval = a.answerId;
  const item = view.model.items.get(`t:${a.callId}`);
  let args = (item && item.args) || null;
  if (!args && a.host && a.host.arguments) args = a.host.arguments;
  const name = a.toolName || (item && item.name) || 'tool';
  const what = [];
  if (a.command) what.push(h('pre', { class: 'cmd' }, h('span', { class: 'prompt', 'aria-hidden': 'true', text: '$ ' }), a.command));
  else {
    const d = proposedDiff(name, args);
    if (d) what.push(diffView(d));
    else if (args) what.push(h('pre', { class: 'out', text: JSON.stringify(args, null, 2) }));
  }
  const feedback = h('textarea', { id: 'reject-feedback', rows: '2', placeholder: 'Tell the agent why, or what to do instead (optional)' });
  const actions = h('div', { class: 'row end approval-actions' },
    h('button', { type: 'button', class: 'btn', id: 'reject-btn', onclick: () => { rejectBox.hidden = false; actions.hidden = true; feedback.focus(); } }, 'Reject…'),
    h('button', { type: 'button', class: 'btn primary', id: 'allow-btn', onclick: () => answer(view, state, toast, a, 'allow-once') }, 'Allow once'));
  const rejectBox = h('div', { class: 'reject-box', hidden: true },
    h('label', { for: 'reject-feedback', text: 'Feedback for the agent' }), feedback,
    h('div', { class: 'row end' },
      h('button', { type: 'button', class: 'btn', onclick: () => { rejectBox.hidden = true; actions.hidden = false; $('reject-btn').focus(); } }, 'Back'),
      h('button', { type: 'button', class: 'btn danger', id: 'reject-send', onclick: () => answer(view, state, toast, a, 'reject', feedback.value.trim()) }, 'Reject')));
  feedback.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); answer(view, state, toast, a, 'reject', feedback.value.trim()); }
  });
  panel.replaceChildren(
    h('div', { class: 'approval-head' },
      h('span', { class: 'approval-icon', 'aria-hidden': 'true', text: '!' }),
      h('h2', { id: 'approval-title', text: `Approve ${name}?` }),
      list.length > 1 ? h('span', { class: 'muted', text: `1 of ${list.length}` }) : null),
    a.reason ? h('p', { class: 'approval-reason', text: a.reason }) : null,
    ...what,
    a.cwd ? h('div', { class: 'muted small', text: `in ${a.cwd}` }) : null,
    rejectBox,
    actions);
  panel.hidden = false;
  panel.scrollIntoView({ block: 'nearest' });
}

async function answer(view, state, toast, a, decision, feedback) {
  const panel = $('approval');
  panel.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  try {
    await api.answer(view.id, a.answerId, decision, feedback);
    const m = state.pendingBySession.get(view.id);
    if (m) m.delete(a.answerId);
  } catch (err) {
    toast(err.code === 'APPROVAL_NOT_PENDING' ? 'This approval was already answered.' : err.message);
    panel.querySelectorAll('button').forEach((b) => { b.disabled = false; });
  }
}
