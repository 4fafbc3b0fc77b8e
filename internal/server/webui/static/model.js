// model.js: folds a session's event log into what the page shows. Every
// view of a session is derived from its events alone (the same envelopes
// the server stores), so a reload, a reconnect or a second tab that
// replays the log arrives at exactly the same page.

/** Every event type a session stream may carry (SSE needs them by name). */
export const EVENT_TYPES = [
  'turn/start', 'turn/end', 'step/start', 'step/end', 'user/message', 'assistant/chunk',
  'assistant/message', 'tool/call', 'tool/result', 'request/header', 'request/context',
  'session/end-seed', 'agent/inbox/spliced', 'llm/retry', 'llm/retry-started', 'todo/write',
  'compaction/start', 'compaction/summary', 'compaction/end', 'compaction/prune',
  'sandbox/mode', 'sandbox/backend', 'approval/policy', 'approval/asked', 'approval/decided',
  'permission/preset', 'subagent/start', 'subagent/end', 'subagent/descriptor', 'session/title',
  'hook/invoked', 'hook/result', 'question/ask', 'question/answer', 'plan/mode', 'goal/change', 'ralph/round',
];

/** The tools that wait for a person: their question item shows them. */
export const QUESTION_TOOLS = new Set(['ask_user_question', 'exit_plan_mode']);

const SUBAGENT_TOOLS = new Set(['subagent', 'subagent_fork']);

function parseArgs(raw) {
  if (raw && typeof raw === 'object') return raw;
  try { return JSON.parse(raw || '{}') || {}; } catch { return null; }
}

/** textOf joins the text blocks of a content list. */
export function textOf(blocks) {
  return (blocks || []).filter((b) => b.type === 'text').map((b) => b.text || '').join('');
}

/** SessionModel is the fold; apply() returns what changed. */
export class SessionModel {
  constructor() {
    this.items = new Map(); // key → item
    this.order = []; // keys in display order
    this.lastSeq = -1;
    this.running = false;
    this.turn = 0;
    this.usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0 };
    this.contextUsed = 0;
    this.contextWindow = 0;
    this.model = '';
    this.effort = '';
    this.preset = '';
    this.title = '';
    this.queue = { 'next-turn': [], 'next-step': [] };
    this.splices = new Map(); // seq → inserted messages (inbox references)
    this.approvals = new Map(); // approval id → approval
    this.callApproval = new Map(); // call id → approval id
    this.children = []; // {runId, childId, label, provider, stop}
    this.todos = null;
    this.questions = new Map(); // question id → question item (kind 'question' or 'plan')
    this.planMode = false;
    this.planKnown = false; // a plan/mode event was read
  }

  /** pendingQuestions returns the questions and plans asked and not answered, oldest first. */
  pendingQuestions() {
    return [...this.questions.values()].filter((q) => !q.answer && !q.stale);
  }

  add(key, item) {
    item.key = key;
    this.items.set(key, item);
    this.order.push(key);
    return item;
  }

  /** pending returns the approvals asked and not decided, oldest first. */
  pending() {
    return [...this.approvals.values()].filter((a) => !a.decided);
  }

  /**
   * apply folds one event. It returns {keys, flags}: the items to redraw
   * and the page parts to refresh ('strip', 'approvals', 'queue', 'tree').
   * An event at or below lastSeq is a duplicate and is ignored.
   */
  apply(ev) {
    const ch = { keys: [], flags: new Set() };
    if (typeof ev.seq !== 'number' || ev.seq <= this.lastSeq) return ch;
    this.lastSeq = ev.seq;
    // session.Event marshals its payload as "data" (the contract's sketch
    // calls it "payload"; either is read).
    const d = ev.data || ev.payload || {};
    const touch = (k) => ch.keys.push(k);
    switch (ev.type) {
      case 'turn/start':
        this.running = true;
        this.turn = d.turn;
        ch.flags.add('strip');
        break;
      case 'turn/end': {
        this.running = false;
        ch.flags.add('strip');
        ch.flags.add('info');
        const reason = d.reason || {};
        for (const it of this.items.values()) {
          if (it.kind === 'assistant' && it.streaming) { it.streaming = false; touch(it.key); }
        }
        // A question cannot outlive its turn: one left unanswered (the
        // process stopped while it waited) is no longer pending.
        for (const q of this.questions.values()) {
          if (!q.answer && !q.stale) { q.stale = true; touch(q.key); ch.flags.add('questions'); }
        }
        if (reason.kind && reason.kind !== 'completed') {
          touch(this.add(`end:${ev.seq}`, { kind: 'end', turn: d.turn, reason }).key);
        }
        break;
      }
      case 'user/message': {
        let msg = d;
        if (d.inboxRef && !d.content) {
          const ins = this.splices.get(d.inboxRef.seq);
          msg = (ins && ins[d.inboxRef.index]) || { content: [] };
        }
        const src = msg.source || {};
        const images = (msg.content || []).filter((b) => b.type === 'image');
        const kind = src.kind === 'user' ? 'user' : src.kind === 'parent' ? 'task' : 'context';
        if (src.kind === 'goal') {
          touch(this.add(`gr:${ev.seq}`, { kind: 'note', tone: 'info', text: `Goal round ${src.round}` }).key);
        }
        if (src.plugin === 'jobs') ch.flags.add('info');
        touch(this.add(`u:${ev.seq}`, { kind, text: textOf(msg.content), images, source: src, time: ev.time }).key);
        break;
      }
      case 'assistant/chunk': {
        const it = this.assistant(d.turn, d.step, ch);
        const c = d.chunk || {};
        if (c.type === 'block-start' && (c.blockType === 'text' || c.blockType === 'reasoning')) {
          it.blocks[c.index] = { type: c.blockType, text: '' };
        } else if (c.type === 'text-delta' || c.type === 'reasoning-delta') {
          const type = c.type === 'text-delta' ? 'text' : 'reasoning';
          const b = it.blocks[c.index] || (it.blocks[c.index] = { type, text: '' });
          b.text += c.text || '';
        } else if (c.type === 'tool-call-delta' && c.name) {
          it.preparing = c.name;
        } else {
          return ch;
        }
        it.streaming = true;
        touch(it.key);
        break;
      }
      case 'assistant/message': {
        const it = this.assistant(d.turn, d.step, ch);
        const blocks = ((d.message && d.message.content) || [])
          .filter((b) => b.type === 'text' || b.type === 'reasoning')
          .map((b) => ({ type: b.type, text: b.text || '' }));
        it.blocks = blocks;
        it.streaming = false;
        it.preparing = '';
        it.interrupted = !!d.interrupted;
        it.done = true;
        if (d.usage) {
          const u = d.usage;
          this.usage.input += u.inputTokens || 0;
          this.usage.output += u.outputTokens || 0;
          this.usage.cacheRead += u.cacheReadTokens || 0;
          this.usage.cacheWrite += u.cacheWriteTokens || 0;
          this.usage.reasoning += u.reasoningTokens || 0;
          this.contextUsed = (u.inputTokens || 0) + (u.cacheReadTokens || 0) + (u.cacheWriteTokens || 0) + (u.outputTokens || 0);
          it.usage = u;
          ch.flags.add('strip');
        }
        touch(it.key);
        break;
      }
      case 'tool/call': {
        const key = `t:${d.callId}`;
        if (this.items.has(key)) break;
        this.add(key, { kind: 'tool', callId: d.callId, name: d.name, rawArgs: d.arguments, args: parseArgs(d.arguments), status: 'running', turn: d.turn, time: ev.time });
        touch(key);
        break;
      }
      case 'tool/result': {
        const key = `t:${d.callId}`;
        const it = this.items.get(key) || this.add(key, { kind: 'tool', callId: d.callId, name: d.name, args: {}, time: ev.time });
        it.result = { content: d.content || [], isError: !!d.isError, error: d.error || null, meta: d.meta || null };
        it.status = d.isError ? 'error' : 'ok';
        it.ended = ev.time;
        if (SUBAGENT_TOOLS.has(it.name) && d.meta && d.meta.childId) {
          it.child = Object.assign(it.child || {}, { id: d.meta.childId, stop: d.meta.stopReason });
          ch.flags.add('tree');
        }
        if (d.meta && d.meta.jobId) ch.flags.add('info');
        touch(key);
        break;
      }
      case 'approval/asked': {
        const a = { id: d.id, callId: d.callId, toolName: d.toolName, reason: d.reason || '', command: d.command || '', cwd: d.cwd || '', decided: null, seq: ev.seq };
        this.approvals.set(d.id, a);
        this.callApproval.set(d.callId, d.id);
        const it = this.items.get(`t:${d.callId}`);
        if (it) { it.status = 'awaiting'; it.approval = a; a.args = it.args; touch(it.key); }
        ch.flags.add('approvals');
        ch.flags.add('strip');
        break;
      }
      case 'approval/decided': {
        const a = this.approvals.get(d.id);
        if (!a) break;
        a.decided = { outcome: d.outcome, by: d.by || d.answerer || '', reason: d.reason || '', feedback: d.feedback || '' };
        const it = this.items.get(`t:${a.callId}`);
        if (it && it.status === 'awaiting') {
          it.status = d.outcome === 'allowed-once' ? 'running' : 'error';
          touch(it.key);
        }
        ch.flags.add('approvals');
        ch.flags.add('strip');
        break;
      }
      case 'agent/inbox/spliced': {
        const ins = d.inserted || [];
        this.splices.set(ev.seq, ins);
        const list = this.queue[d.target] || (this.queue[d.target] = []);
        const start = Math.min(Math.max(d.start || 0, 0), list.length);
        list.splice(start, d.removedCount || 0, ...ins.map((m, i) => ({ id: m.id || '', seq: ev.seq, index: i, text: textOf(m.content), source: m.source || {} })));
        ch.flags.add('queue');
        break;
      }
      case 'subagent/start': {
        const child = { runId: d.runId, childId: d.childId, label: d.label || '', provider: d.provider, depth: d.depth, stop: '' };
        this.children.push(child);
        // The card of the delegating call: the open subagent call whose
        // description is the run's label, else the oldest open one.
        let card = null;
        for (const k of this.order) {
          const it = this.items.get(k);
          if (it.kind !== 'tool' || !SUBAGENT_TOOLS.has(it.name) || it.result || (it.child && it.child.id)) continue;
          if (!card) card = it;
          if (it.args && it.args.description === child.label) { card = it; break; }
        }
        if (card) { card.child = { id: d.childId, label: child.label, stop: '' }; touch(card.key); }
        ch.flags.add('tree');
        break;
      }
      case 'subagent/end': {
        const c = this.children.find((x) => x.runId === d.runId);
        if (c) c.stop = d.stopReason;
        for (const it of this.items.values()) {
          if (it.kind === 'tool' && it.child && it.child.id === d.childId) { it.child.stop = d.stopReason; touch(it.key); }
        }
        ch.flags.add('tree');
        break;
      }
      case 'request/header': {
        const c = (d.header && d.header.config) || {};
        this.model = c.model || this.model;
        this.effort = c.effort || '';
        ch.flags.add('strip');
        break;
      }
      case 'request/context':
        if (d.contextWindow) this.contextWindow = d.contextWindow;
        if (d.model) this.model = d.model;
        ch.flags.add('strip');
        break;
      case 'permission/preset':
        this.preset = d.preset || '';
        ch.flags.add('strip');
        break;
      case 'session/title':
        if (d.title) { this.title = d.title; ch.flags.add('strip'); }
        break;
      case 'llm/retry': {
        const f = d.failure || {};
        const secs = Math.round((d.delayMs || 0) / 100) / 10;
        touch(this.add(`r:${d.retryId}`, { kind: 'note', tone: 'warn', text: `Model call failed (${f.code || 'error'}${f.message ? ': ' + f.message : ''}); retry ${d.retry} of ${d.maxRetries} in ${secs}s` }).key);
        break;
      }
      case 'llm/retry-started': {
        const it = this.items.get(`a:${d.turn}:${d.step}`);
        if (it && !it.done) { it.blocks = []; touch(it.key); }
        break;
      }
      case 'hook/result': {
        // Only what changed the course of things is shown: a hook that
        // denied or blocked, or one whose answer could not be used.
        if (!d.decision && !d.error && !d.timedOut) break;
        const what = d.decision === 'deny' || d.decision === 'block' ? `${d.decision === 'deny' ? 'denied' : 'blocked'} it` : d.decision ? `answered ${d.decision}` : 'failed';
        const why = d.reason || d.error || d.stderrSummary || (d.timedOut ? 'timed out' : '');
        touch(this.add(`hook:${ev.seq}`, { kind: 'note', tone: d.decision === 'allow' ? 'info' : 'warn', text: `Hook ${d.event}${d.matcher ? ' (' + d.matcher + ')' : ''} ${what}${why ? ': ' + why.trim() : ''}` }).key);
        break;
      }
      case 'session/end-seed':
        touch(this.add(`seed:${ev.seq}`, { kind: 'note', tone: 'info', text: 'Forked here: everything above was inherited from the parent session.' }).key);
        break;
      case 'compaction/end':
        touch(this.add(`c:${ev.seq}`, { kind: 'note', tone: 'info', text: 'Earlier context was summarised to make room (compaction).' }).key);
        break;
      case 'question/ask': {
        if (!d.questionId || this.questions.has(d.questionId)) break;
        const q = this.add(`q:${d.questionId}`, { kind: 'question', id: d.questionId, callId: d.callId || '', ask: d.kind === 'plan' ? 'plan' : 'question',
          questions: d.questions || [], plan: d.plan || '', answer: null, stale: false, time: ev.time });
        this.questions.set(d.questionId, q);
        const tool = this.items.get(`t:${d.callId}`);
        if (tool) { tool.question = q.id; touch(tool.key); }
        touch(q.key);
        ch.flags.add('questions');
        ch.flags.add('strip');
        break;
      }
      case 'question/answer': {
        const q = this.questions.get(d.questionId);
        if (!q) break;
        q.answer = { status: d.status || 'answered', answers: d.answers || {}, approved: d.approved, feedback: d.feedback || '' };
        touch(q.key);
        ch.flags.add('questions');
        ch.flags.add('strip');
        break;
      }
      case 'plan/mode': {
        const was = this.planMode;
        this.planMode = !!d.active;
        const first = !this.planKnown;
        this.planKnown = true;
        ch.flags.add('strip');
        ch.flags.add('plan');
        if (was === this.planMode && !first) break;
        if (first && !this.planMode) break;
        const text = this.planMode ? 'Plan mode on — the agent plans and does not write until you approve its plan.'
          : d.source === 'plan-approved' ? 'Plan approved — plan mode is off and the agent may now make changes.' : 'Plan mode off.';
        touch(this.add(`pm:${ev.seq}`, { kind: 'note', tone: this.planMode ? 'plan' : 'info', text }).key);
        break;
      }
      case 'todo/write':
        this.todos = d.todos || d.items || null;
        break;
      case 'goal/change': {
        // Every change carries the whole goal (none after a clear); the
        // bar shows it, and a note marks what changed.
        this.goal = d.goal || null;
        ch.flags.add('goal').add('info');
        if (d.operation !== 'round') {
          const verbs = { create: 'set', edit: 'edited', pause: 'paused', resume: 'resumed', complete: 'complete', arm: 're-armed', clear: 'cleared' };
          const what = d.operation === 'block' ? `blocked: ${(d.goal && d.goal.blockedReason) || ''}` : (verbs[d.operation] || d.operation);
          touch(this.add(`g:${ev.seq}`, { kind: 'note', tone: 'info', text: `Goal ${what}${d.by ? ` (by ${d.by})` : ''}.` }).key);
        }
        break;
      }
      default:
        break;
    }
    return ch;
  }

  assistant(turn, step, ch) {
    const key = `a:${turn}:${step}`;
    let it = this.items.get(key);
    if (!it) {
      it = this.add(key, { kind: 'assistant', turn, step, blocks: [], streaming: false, done: false });
      ch.keys.push(key);
    }
    return it;
  }
}
