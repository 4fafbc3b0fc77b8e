// app.js: the dsh web UI. One page: a sidebar of sessions by workspace,
// the open session's conversation rebuilt from its event log and kept
// live over SSE, an approval panel, a composer, and a side panel with the
// subagent tree and background jobs.
import { api, Stream } from './api.js';
import { SessionModel, EVENT_TYPES } from './model.js';
import { h, renderItem, fmtTokens, isSubagent } from './render.js';
import { pendingApprovals, paintApprovals } from './approvals.js';
import { pendingQuestions, paintQuestions, paintPlanMode } from './questions.js';
import { renderSidebar } from './sidebar.js';
import { initSearch } from './search.js';
import { setupDialog } from './dialog.js';
import { renderTree, renderJobs } from './panel.js';
import { setupAttachments, takeAttachments, restoreAttachments, hasAttachments } from './attach.js';

const $ = (id) => document.getElementById(id);

const state = {
  sessions: [], // Info, newest first
  workspaces: null,
  currentId: '',
  lastCwd: '',
  statusBySession: new Map(), // live status from the host feed
  pendingBySession: new Map(), // session id → Map(approval id → Approval) from the host feed
  questionsBySession: new Map(), // session id → Map(question id → Question) from the host feed
  // session id → how many approval and question events the feed brought for
  // it: a session's info fetched before one of them is older than the maps.
  askGen: new Map(),
  created: new Map(), // session id → {model, effort, permission} asked for by this page
  expanded: new Set(), // workspace paths whose whole session list is shown
};

let view = null; // the open session: {id, model, stream, info, nodes, dirty, flags}
let feed = null; // the host feed's Stream

function toast(msg) {
  const t = $('toast');
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
}

// ---- sessions list and the host feed

async function loadSessions() {
  try {
    const [s, w] = await Promise.all([api.sessions({ children: true }), api.workspaces().catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    state.sessions = s.sessions || [];
    state.workspaces = w ? w.workspaces || [] : null;
  } catch (err) {
    if (err.status === 401) {
      if (feed) feed.close();
      document.querySelector('#empty h2').textContent = 'Not signed in';
      document.querySelector('#empty p').textContent = 'Open the URL that dsh serve printed: it carries the access token once, and this browser keeps it as a cookie.';
      $('empty-new').hidden = true;
    } else {
      toast(err.message);
    }
  }
  renderSidebar(state);
}

let sidebarTimer = null;
function sidebarSoon() {
  if (sidebarTimer) return;
  sidebarTimer = requestAnimationFrame(() => { sidebarTimer = null; renderSidebar(state); });
}

function upsertSession(info) {
  const i = state.sessions.findIndex((s) => s.header.id === info.header.id);
  if (i >= 0) state.sessions[i] = info;
  else state.sessions.unshift(info);
}

function onFeed(type, e) {
  switch (type) {
    case 'session/added':
      if (e.session) upsertSession(e.session);
      break;
    case 'session/status':
      state.statusBySession.set(e.sessionId, e.status);
      if (!state.sessions.some((s) => s.header.id === e.sessionId)) loadSessionsSoon();
      if (view && view.id === e.sessionId) { refreshInfo(); view.flags.add('strip'); schedule(); }
      break;
    case 'session/removed':
      state.statusBySession.delete(e.sessionId);
      loadSessionsSoon();
      break;
    case 'approval/pending': {
      const a = e.approval;
      if (!a) break;
      const id = a.sessionId || e.sessionId;
      bumpAsks(id);
      if (!state.pendingBySession.has(id)) state.pendingBySession.set(id, new Map());
      state.pendingBySession.get(id).set(a.id, a);
      if (view) { view.flags.add('approvals'); schedule(); }
      break;
    }
    case 'question': {
      const q = e.question;
      if (!q) break;
      const id = q.sessionId || e.sessionId;
      bumpAsks(id);
      if (!state.questionsBySession.has(id)) state.questionsBySession.set(id, new Map());
      state.questionsBySession.get(id).set(q.id, q);
      if (view) { view.flags.add('questions').add('strip'); schedule(); }
      break;
    }
    case 'question-resolved': {
      bumpAsks(e.sessionId);
      const m = state.questionsBySession.get(e.sessionId);
      if (m) m.delete(e.id);
      if (view) { view.flags.add('questions').add('strip'); schedule(); }
      break;
    }
    case 'approval/resolved': {
      bumpAsks(e.sessionId);
      const m = state.pendingBySession.get(e.sessionId);
      if (m) m.delete(e.approvalId);
      if (view) { view.flags.add('approvals'); schedule(); }
      break;
    }
    default:
      if (type.startsWith('workspace/')) loadSessionsSoon();
  }
  sidebarSoon();
}

let reloadTimer = null;
function loadSessionsSoon() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(loadSessions, 150);
}

function setConn(s) {
  const c = $('conn');
  c.dataset.state = s;
  c.textContent = s === 'open' ? 'live' : s === 'retrying' ? 'reconnecting…' : s;
}

// ---- the open session

function openSession(id) {
  if (view && view.id === id) return;
  closeSession();
  state.currentId = id;
  $('empty').hidden = true;
  $('timeline').hidden = false;
  $('timeline').replaceChildren();
  $('topbar').hidden = false;
  $('composer').hidden = false;
  $('session-title').textContent = 'Loading…';
  $('session-sub').textContent = '';
  view = { id, model: new SessionModel(), info: null, nodes: new Map(), dirty: new Set(), flags: new Set(['strip', 'approvals', 'questions', 'plan', 'queue', 'tree', 'jobs']), raf: 0, planWant: null };
  const v = view;
  // A fresh load replays the whole log (after=-1); a reconnect resumes
  // after the last seq seen (EventSource's Last-Event-ID, or after= when
  // Stream has to open a new EventSource).
  v.stream = new Stream(
    (last) => `/api/sessions/${encodeURIComponent(id)}/stream?after=${last ?? v.model.lastSeq}`,
    EVENT_TYPES,
    (_type, ev) => { if (view === v) onSessionEvent(ev); },
    (s) => {
      if (view !== v) return;
      // Back after a drop: the events resume by seq; status and jobs are
      // not events, so read them again.
      if (s === 'open' && v.dropped) refreshInfo();
      v.dropped = s === 'retrying';
      setConn(s);
    });
  // Nothing of the previous session's side panel may linger.
  $('tree').replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
  $('jobs').replaceChildren();
  $('goal-bar').hidden = true;
  $('approval').hidden = true;
  $('approval').replaceChildren();
  delete $('approval').dataset.approval;
  delete $('approval').dataset.key;
  $('question').hidden = true;
  $('question').replaceChildren();
  delete $('question').dataset.key;
  refreshInfo();
  renderSidebar(state);
  schedule();
}

function closeSession() {
  if (!view) return;
  view.stream.close();
  cancelAnimationFrame(view.raf);
  clearTimeout(view.treeTimer);
  clearTimeout(view.infoTimer);
  view = null;
}

function onSessionEvent(ev) {
  const ch = view.model.apply(ev);
  // The log says what plan mode is now: a toggle in flight has landed.
  if (ch.flags.has('plan')) view.planWant = null;
  for (const k of ch.keys) view.dirty.add(k);
  for (const f of ch.flags) view.flags.add(f);
  schedule();
}

/** bumpAsks notes a feed event about a session's approvals or questions. */
function bumpAsks(id) {
  state.askGen.set(id, (state.askGen.get(id) || 0) + 1);
}

async function refreshInfo() {
  const v = view;
  if (!v) return;
  const gen = state.askGen.get(v.id) || 0;
  try {
    const info = await api.session(v.id);
    if (view !== v) return;
    v.info = info;
    upsertSession(info);
    state.lastCwd = info.header.cwd;
    // The pending approvals and questions of an answer that a feed event
    // overtook are older than what the feed said: keep the feed's.
    const fresh = (state.askGen.get(v.id) || 0) === gen;
    if (fresh && info.pendingApprovals) {
      const m = new Map(info.pendingApprovals.map((a) => [a.id, a]));
      state.pendingBySession.set(info.header.id, m);
    }
    v.flags.add('strip').add('jobs').add('approvals').add('plan');
    if (fresh && info.live) {
      // The host's pending questions, as of this answer: one the log has
      // not shown yet appears at once.
      state.questionsBySession.set(v.id, new Map((info.pendingQuestions || []).map((q) => [q.id, q])));
      v.flags.add('questions');
    }
    schedule();
  } catch (err) {
    if (view === v) {
      if (err.code === 'SESSION_NOT_FOUND') {
        // Nothing to follow: stop the stream's retries.
        v.stream.close();
        $('session-title').textContent = 'Session not found';
        $('composer').hidden = true;
      } else {
        $('session-title').textContent = 'Could not load the session';
      }
      toast(err.message);
    }
  }
}

// infoSoon refreshes the session's info (jobs, context) once a burst of
// events that may change it has passed; while a job runs it polls, since
// a job's progress is not in the log until its completion notice.
function infoSoon(delay = 150) {
  const v = view;
  clearTimeout(v.infoTimer);
  v.infoTimer = setTimeout(() => { if (view === v) refreshInfo(); }, delay);
}

function schedule() {
  if (!view || view.raf) return;
  view.raf = requestAnimationFrame(paint);
}

// paint applies what changed since the last frame: a burst of streamed
// chunks costs one redraw of the item they belong to.
function paint() {
  const v = view;
  if (!v) return;
  v.raf = 0;
  const conv = $('conversation');
  const stick = conv.scrollHeight - conv.scrollTop - conv.clientHeight < 80;
  const tl = $('timeline');
  for (const key of v.dirty) {
    const it = v.model.items.get(key);
    if (!it) continue;
    const el = renderItem(it);
    const old = v.nodes.get(key);
    if (old) {
      // Keep open <details> open across redraws.
      const open = [...old.querySelectorAll('details')].map((d) => d.open);
      el.querySelectorAll('details').forEach((d, i) => { if (open[i] !== undefined) d.open = open[i]; });
      old.replaceWith(el);
    } else {
      tl.append(el);
    }
    v.nodes.set(key, el);
  }
  v.dirty.clear();
  // A session with nothing to show yet says where it runs and what next.
  const fresh = v.model.order.length === 0 && v.info && !isSubagent(v.info);
  $('fresh').hidden = !fresh;
  if (fresh) {
    $('fresh-text').replaceChildren('Tell dsh what to do in ', h('code', { text: v.info.header.cwd }), '. Enter sends; Shift+Enter adds a line.');
  }
  // Between the prompt and the first token (or while a tool runs) the
  // page says that the agent is at work.
  const last = v.model.items.get(v.model.order[v.model.order.length - 1]);
  const busy = last && ((last.kind === 'assistant' && last.streaming) || (last.kind === 'tool' && last.status === 'awaiting'));
  $('working').hidden = !v.model.running || !!busy || questionsOf(v).length > 0;
  if (v.model.running && last && last.kind === 'tool' && last.status === 'running') $('working-text').textContent = `Running ${last.name}…`;
  else $('working-text').textContent = 'Thinking…';
  const f = v.flags;
  if (f.has('strip')) paintStrip();
  if (f.has('approvals')) paintApprovals(view, state, toast);
  if (f.has('questions')) paintQuestions(v.id, questionsOf(v), (qid) => answeredQuestion(v, qid), toast);
  if (f.has('plan') || f.has('strip')) paintPlanMode(planActive(v), v.planWant);
  if (f.has('queue') || f.has('strip')) paintComposer();
  if (f.has('tree')) treeSoon();
  if (f.has('info')) infoSoon();
  if (f.has('jobs')) paintJobs();
  if (f.has('goal') || f.has('strip')) paintGoal();
  f.clear();
  if (stick) conv.scrollTop = conv.scrollHeight;
}

// paintGoal shows the session's goal: objective, phase (and whether its
// rounds are armed here) and round n of max. The log's goal/change events
// keep it current; a stored session's goal comes from its info.
function paintGoal() {
  const v = view;
  const g = v.model.goal !== undefined ? v.model.goal : (v.info && v.info.goal && v.info.goal.goal) || null;
  $('goal-bar').hidden = !g;
  if (!g) return;
  $('goal-objective').textContent = g.objective;
  $('goal-objective').title = g.objective;
  const armed = v.info && v.info.goal && v.info.goal.goal && v.info.goal.goal.goalId === g.goalId ? v.info.goal.armed : true;
  let phase = g.phase;
  if (g.phase === 'blocked' && g.blockedReason) phase += `: ${g.blockedReason}`;
  else if (g.phase === 'active' && !armed) phase += ' (not armed here)';
  $('goal-phase').textContent = phase;
  $('goal-rounds').textContent = `round ${g.roundsStarted}/${g.max_goal_rounds}`;
}

function liveStatus() {
  const m = view.model;
  if (pendingApprovals(view, state).length) return 'awaiting-approval';
  if (questionsOf(view).length) return 'awaiting-answer';
  const s = state.statusBySession.get(view.id) || (view.info && view.info.status);
  if (m.running) return 'running';
  return s === 'running' ? 'running' : 'idle';
}

function paintStrip() {
  const v = view;
  const m = v.model;
  const info = v.info;
  const title = m.title || (info && info.title) || 'Untitled session';
  $('session-title').textContent = title;
  // A title named in the log (session/title) reaches the sidebar too.
  const listed = state.sessions.find((x) => x.header.id === v.id);
  if (listed && m.title && listed.title !== m.title) { listed.title = m.title; sidebarSoon(); }
  document.title = `${title} · dsh`;
  if (info) $('session-sub').textContent = `${info.header.cwd} · ${info.header.id.slice(0, 12)}`;
  const st = liveStatus();
  const badge = $('status-badge');
  badge.className = `badge ${st}`;
  badge.textContent = st === 'awaiting-approval' ? 'needs approval' : st === 'awaiting-answer' ? 'needs your answer' : st;
  // Before the first model request the log names no model: show what the
  // session was created with, when this page created it.
  const asked = state.created.get(v.id) || {};
  $('model-chip').textContent = [m.model || asked.model, m.effort || asked.effort].filter(Boolean).join(' · ') || '—';
  $('perm-chip').textContent = m.preset || asked.permission || '—';
  // Usage folded from the log's assistant messages; the server's totals
  // stand in until the log has any.
  const lu = m.usage;
  const iu = (info && info.usage) || {};
  const fromLog = lu.input + lu.output + lu.cacheRead > 0;
  const inTok = fromLog ? lu.input + lu.cacheRead + lu.cacheWrite : (iu.inputTokens || 0) + (iu.cacheReadTokens || 0) + (iu.cacheWriteTokens || 0);
  const cached = fromLog ? lu.cacheRead : iu.cacheReadTokens || 0;
  const outTok = fromLog ? lu.output : iu.outputTokens || 0;
  $('usage-chip').textContent = `${fmtTokens(inTok)} in · ${fmtTokens(outTok)} out`;
  $('usage-chip').title = `Token usage: ${inTok} input (${cached} from cache), ${outTok} output`;
  const ctx = info && info.context;
  const used = m.contextUsed || (ctx && ctx.usedTokens) || 0;
  const win = m.contextWindow || (ctx && ctx.windowTokens) || 0;
  const frac = win ? Math.min(1, used / win) : 0;
  $('ctx-fill').style.width = `${(frac * 100).toFixed(1)}%`;
  $('ctx-fill').className = 'ctx-fill' + (frac > 0.85 ? ' hot' : frac > 0.6 ? ' warm' : '');
  $('ctx-text').textContent = win ? `${Math.round(frac * 100)}% of ${fmtTokens(win)}` : 'context —';
  $('ctx').setAttribute('aria-label', win ? `Context ${Math.round(frac * 100)} percent used` : 'Context use unknown');
  const child = isSubagent(info);
  $('fork-btn').hidden = !info || child;
  const banner = $('readonly-banner');
  banner.hidden = !child;
  const parent = child ? info.parentId || info.header.parentSession || '' : '';
  // Rebuilt only when it changes: a redraw between mousedown and mouseup
  // would swallow a click on the link.
  if (child && banner.dataset.parent !== parent) {
    banner.dataset.parent = parent;
    banner.replaceChildren(h('span', { text: 'Subagent session — read-only. ' }), parent ? h('a', { href: `#/s/${parent}`, text: 'Back to the parent session' }) : '');
  }
  $('composer').hidden = !!child;
}

// questionsOf: the open session's pending questions and plans.
function questionsOf(v) {
  return pendingQuestions(v.model, state.questionsBySession.get(v.id));
}

function answeredQuestion(v, qid) {
  const m = state.questionsBySession.get(v.id);
  if (m) m.delete(qid);
  if (view === v) { v.flags.add('questions').add('strip'); schedule(); }
}

// planActive: what the log says (a plan/mode event), else the host.
function planActive(v) {
  return v.model.planKnown ? v.model.planMode : !!(v.info && v.info.planMode);
}

async function togglePlan() {
  const v = view;
  if (!v) return;
  const want = !planActive(v);
  v.planWant = want;
  paintPlanMode(planActive(v), want);
  try {
    await api.setPlanMode(v.id, want);
    // The host logs plan/mode at the next step boundary (now, when
    // idle); the log's event then settles the toggle.
  } catch (err) {
    v.planWant = null;
    toast(err.message);
  }
  if (view === v) { v.flags.add('plan'); schedule(); }
}

function paintComposer() {
  const m = view.model;
  const running = m.running || liveStatus() === 'running';
  $('cancel-btn').hidden = !running && !pendingApprovals(view, state).length && !questionsOf(view).length;
  $('steer-btn').hidden = !running;
  $('send-btn').textContent = running ? 'Queue' : 'Send';
  $('composer-hint').textContent = running
    ? 'Enter queues for the next turn · Ctrl+Enter steers now · Esc stops'
    : 'Enter to send · Shift+Enter for a new line';
  const q = $('queue');
  const chips = [];
  for (const [target, label] of [['next-step', 'Steering'], ['next-turn', 'Queued']]) {
    for (const x of m.queue[target] || []) {
      if (x.source.kind && x.source.kind !== 'user') continue;
      const chip = h('div', { class: `queued ${target}` }, h('span', { class: 'queued-label', text: label }), h('span', { class: 'queued-text', text: x.text }));
      // A message queued for a later turn can still go into this one, or
      // be taken back; the log's splices then update the list.
      if (target === 'next-turn' && x.id) {
        chip.append(h('span', { class: 'queued-actions' },
          h('button', { type: 'button', class: 'btn ghost small steer-now', 'aria-label': `Steer now: ${x.text}`, onclick: (e) => updateQueue(e.currentTarget, x.id, 'steer') }, 'Steer now'),
          h('button', { type: 'button', class: 'btn ghost small unqueue', 'aria-label': `Remove from queue: ${x.text}`, onclick: (e) => updateQueue(e.currentTarget, x.id, 'remove') }, 'Remove')));
      }
      chips.push(chip);
    }
  }
  q.replaceChildren(...chips);
  q.hidden = !chips.length;
}

async function updateQueue(btn, messageId, op) {
  if (!view) return;
  btn.parentElement.querySelectorAll('button').forEach((b) => { b.disabled = true; });
  try {
    await api.updateQueue(view.id, messageId, op);
  } catch (err) {
    toast(err.code === 'QUEUE_ITEM_NOT_FOUND' ? 'That message has already left the queue.' : err.message);
    btn.parentElement.querySelectorAll('button').forEach((b) => { b.disabled = false; });
  }
}

async function send(delivery) {
  const ta = $('composer-input');
  const text = ta.value.trim();
  if ((!text && !hasAttachments()) || !view) return;
  const id = view.id;
  const images = takeAttachments();
  ta.value = '';
  autosize();
  try {
    await api.send(id, text, delivery, images);
  } catch (err) {
    if (!ta.value) ta.value = text;
    restoreAttachments(images);
    toast(err.status === 413 ? 'The message is too large for dsh serve (attach smaller images).' : err.message);
  }
}

async function cancelTurn() {
  if (!view) return;
  try {
    await api.cancel(view.id);
  } catch (err) {
    toast(err.message);
  }
}

function autosize() {
  const ta = $('composer-input');
  ta.style.height = 'auto';
  ta.style.height = Math.min(ta.scrollHeight, 240) + 'px';
}

// ---- side panel: subagent tree and background jobs

function treeSoon() {
  clearTimeout(view.treeTimer);
  const v = view;
  v.treeTimer = setTimeout(() => paintTree(v), 200);
}

async function paintTree(v) {
  const el = $('tree');
  let rows;
  try {
    rows = (await api.tree(v.id)).rows || [];
  } catch (err) {
    if (view === v) el.replaceChildren(h('p', { class: 'muted', text: `Tree unavailable: ${err.message}` }));
    return;
  }
  if (view !== v) return;
  const title = v.model.title || (v.info && v.info.title) || 'This session';
  renderTree(el, rows, title, v.model.running);
  if (rows.length && $('side-panel').hidden && !v.treeShown) { v.treeShown = true; togglePanel(true); }
}

function paintJobs() {
  const jobs = (view.info && view.info.jobs) || [];
  if (jobs.some((j) => j.status === 'running' || j.status === 'stopping')) infoSoon(2000);
  renderJobs($('jobs'), jobs);
  if (jobs.length && $('side-panel').hidden && !view.jobsShown) { view.jobsShown = true; togglePanel(true); }
}

function togglePanel(show) {
  const p = $('side-panel');
  p.hidden = show === undefined ? !p.hidden : !show;
  $('panel-toggle').setAttribute('aria-expanded', String(!p.hidden));
}

// ---- routing and start-up

function route() {
  const m = location.hash.match(/^#\/s\/([A-Za-z0-9_-]+)/);
  if (m) { openSession(m[1]); return; }
  closeSession();
  state.currentId = '';
  $('empty').hidden = false;
  $('fresh').hidden = true;
  $('working').hidden = true;
  $('timeline').hidden = true;
  $('topbar').hidden = true;
  $('composer').hidden = true;
  $('approval').hidden = true;
  $('question').hidden = true;
  document.title = 'dsh';
  renderSidebar(state);
}

function wire() {
  const ta = $('composer-input');
  ta.addEventListener('input', autosize);
  ta.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send((e.ctrlKey || e.metaKey) && view && view.model.running ? 'steer' : 'queue');
    } else if (e.key === 'Escape' && view && view.model.running) {
      e.preventDefault();
      cancelTurn();
    }
  });
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send('queue'); });
  $('steer-btn').addEventListener('click', () => send('steer'));
  $('cancel-btn').addEventListener('click', cancelTurn);
  $('plan-btn').addEventListener('click', togglePlan);
  $('panel-toggle').addEventListener('click', () => togglePanel());
  $('fork-btn').addEventListener('click', async () => {
    if (!view) return;
    try {
      const info = await api.fork(view.id);
      upsertSession(info);
      location.hash = `#/s/${info.header.id}`;
    } catch (err) {
      toast(err.message);
    }
  });
  // Narrow screens: the sidebar is an overlay, closed again by a choice.
  const setNav = (open) => { document.body.classList.toggle('nav-open', open); $('nav-toggle').setAttribute('aria-expanded', String(open)); };
  $('nav-toggle').addEventListener('click', () => setNav(!document.body.classList.contains('nav-open')));
  $('session-nav').addEventListener('click', (e) => { if (e.target.closest('a')) setNav(false); });
  $('search-results').addEventListener('click', (e) => { if (e.target.closest('a')) setNav(false); });
  initSearch();
  $('new-session').addEventListener('click', () => setNav(false));
  setupAttachments(toast);
  window.addEventListener('hashchange', route);
  setupDialog(state, (info) => {
    upsertSession(info);
    location.hash = `#/s/${info.header.id}`;
    requestAnimationFrame(() => $('composer-input').focus());
  }, toast);
}

wire();
loadSessions();
let feedDropped = false;
feed = new Stream(() => '/api/events', ['session/added', 'session/status', 'session/removed', 'approval/pending', 'approval/resolved', 'question', 'question-resolved', 'workspace/changed', 'workspace/removed', 'workspace/order'], onFeed, (s) => {
  // On every connect the feed sends a snapshot (pending approvals, live
  // statuses): after a drop, what was known before is replaced by it.
  if (s === 'open' && feedDropped) {
    state.pendingBySession.clear();
    state.questionsBySession.clear();
    state.askGen.clear();
    state.statusBySession.clear();
    if (view) refreshInfo();
    loadSessions();
  }
  feedDropped = s === 'retrying';
  if (!view) setConn(s);
});
route();
