// render.js: DOM for the items of a session's timeline. Everything the
// model or a tool produced is inserted as text (textContent), never as
// HTML, so a transcript cannot inject markup into the page.

/** h builds an element: h('div', {class: 'x'}, child, 'text', …). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    // Through the CSSOM: the CSP forbids style attributes (style-src 'self').
    else if (k === 'style') for (const [p, x] of Object.entries(v)) el.style.setProperty(p, x);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * isSubagent tells a subagent's session (read-only here: its parent
 * drives it) from a fork, which has a parent too but is a session of its own.
 */
export function isSubagent(info) {
  const hd = (info && info.header) || {};
  return hd.origin === 'subagent' || hd.delegationDepth > 0;
}

/** fmtTokens writes 1234 as 1.2k. */
export function fmtTokens(n) {
  if (!n) return '0';
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1000).toFixed(n < 1e4 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}

function fmtDuration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} m ${Math.round((ms % 60000) / 1000)} s`;
}

/**
 * safeHref is url as a link target when it is an absolute http: or https:
 * URL, else null. A link made from model or tool text must not run script
 * (javascript:, in any spelling the URL parser folds into it: JaVaScRiPt:,
 * java\tscript:, leading blanks), open a document of the model's making
 * (data:, blob:) or hand anything to another program (vbscript:, file:,
 * custom schemes). Relative URLs are refused too: they would resolve
 * against dsh serve itself. The parsed form is returned, so the browser
 * follows exactly what was checked.
 */
export function safeHref(url) {
  if (typeof url !== 'string') return null;
  let u;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
}

/** extLink is a link to url in a new tab, or plain text when url is not safe to link. */
function extLink(url, label) {
  const href = safeHref(url);
  if (!href) return h('span', { class: 'unlinked', text: label });
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer', text: label });
}

// ---- a small Markdown subset: fences, headings, lists, inline code, bold.

function inline(text) {
  const out = [];
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*|\[[^\]\n]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0;
  for (let m; (m = re.exec(text));) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (t.startsWith('`')) out.push(h('code', { text: t.slice(1, -1) }));
    else if (t.startsWith('**')) out.push(h('strong', { text: t.slice(2, -2) }));
    else {
      const label = t.slice(1, t.indexOf(']('));
      out.push(safeHref(m[2]) ? extLink(m[2], label) : t);
    }
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** markdown renders text as a fragment of block elements. */
export function markdown(text) {
  const frag = document.createDocumentFragment();
  const lines = text.split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) frag.append(h('p', null, inline(para.join('\n'))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*```(\S*)/);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !/^\s*```/.test(lines[i])) body.push(lines[i++]);
      i++;
      frag.append(h('pre', { class: 'code' }, h('code', { 'data-lang': fence[1] || null, text: body.join('\n') })));
      continue;
    }
    const head = line.match(/^(#{1,4})\s+(.*)/);
    if (head) {
      flush();
      frag.append(h(head[1].length <= 2 ? 'h3' : 'h4', null, inline(head[2])));
      i++;
      continue;
    }
    const item = line.match(/^\s*([-*]|\d+[.)])\s+(.*)/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const m = lines[i].match(/^\s*([-*]|\d+[.)])\s+(.*)/);
        if (!m || /\d/.test(m[1]) !== ordered) break;
        list.append(h('li', null, inline(m[2])));
        i++;
      }
      frag.append(list);
      continue;
    }
    if (line.trim() === '') flush();
    else para.push(line);
    i++;
  }
  flush();
  return frag;
}

// ---- diffs

/** diffView renders unified-diff text with added and removed lines marked. */
export function diffView(text) {
  const pre = h('pre', { class: 'diff' });
  for (const line of text.replace(/\n$/, '').split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---')) cls = 'file';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    pre.append(h('span', { class: 'dl ' + cls, text: line + '\n' }));
  }
  return pre;
}

/** proposedDiff is the diff an edit or write would make, from its arguments. */
export function proposedDiff(name, args) {
  if (!args) return '';
  const path = args.file_path || args.path || '';
  const lines = (s, p) => (s || '').replace(/\n$/, '').split('\n').map((l) => p + l).join('\n');
  if (name === 'write' || (name === 'str_replace_based_edit_tool' && args.command === 'create')) {
    return `+++ ${path}\n${lines(args.content ?? args.file_text, '+')}\n`;
  }
  if (name === 'edit' || (name === 'str_replace_based_edit_tool' && args.command === 'str_replace')) {
    return `--- ${path}\n+++ ${path}\n${lines(args.old_string ?? args.old_str, '-')}\n${lines(args.new_string ?? args.new_str, '+')}\n`;
  }
  return '';
}

// ---- tool cards

const ICONS = { bash: '$', terminal_open: '▭', terminal_send: '▭', terminal_read: '▭', terminal_signal: '▭', terminal_close: '▭', edit: '✎', write: '✎', str_replace_based_edit_tool: '✎', read: '▤', web_fetch: '⇣', web_search: '⌕', subagent: '◆', subagent_fork: '◆', glob: '⌕', grep: '⌕', lsp: '⌕', todo_write: '☑' };

/** toolSummary is the one-line description of a call, for its card header. */
export function toolSummary(name, args) {
  const a = args || {};
  switch (name) {
    case 'bash': return a.description || '';
    case 'read': case 'edit': case 'write': case 'read_image': return a.file_path || '';
    case 'str_replace_based_edit_tool': return `${a.command || ''} ${a.path || ''}`.trim();
    case 'web_fetch': return a.url || '';
    case 'web_search': return a.query || '';
    case 'glob': case 'grep': return a.pattern || '';
    case 'lsp': return `${a.operation || ''} ${a.file_path || ''}${a.line ? `:${a.line}` : ''}${a.line && a.character ? `:${a.character}` : ''}`.trim();
    case 'subagent': case 'subagent_fork': return a.description || (a.prompt || '').slice(0, 80);
    case 'job_output': case 'job_kill': return a.job_id || a.id || '';
    case 'terminal_open': return a.name || a.command || a.type || '';
    case 'terminal_send': return `${a.session_id || ''} ${(a.text || '').split('\n')[0]}`.trim();
    case 'terminal_read': case 'terminal_close': return a.session_id || '';
    case 'terminal_signal': return `${a.session_id || ''} SIG${a.signal || ''}`.trim();
    default: return '';
  }
}

function statusPill(it) {
  const meta = (it.result && it.result.meta) || {};
  let label = { running: 'running', awaiting: 'needs approval', ok: 'done', error: 'failed' }[it.status] || it.status;
  let cls = it.status;
  if (it.name === 'bash' && it.result && typeof meta.exitCode === 'number' && !meta.background) {
    label = meta.timedOut ? 'timed out' : meta.cancelled ? 'cancelled' : `exit ${meta.exitCode}`;
    if (meta.exitCode !== 0) cls = 'error';
  }
  if (it.result && it.result.error) {
    const code = it.result.error.code || '';
    const outcome = it.approval && it.approval.decided && it.approval.decided.outcome;
    if (outcome === 'rejected' || /REJECT/.test(code)) { label = 'rejected'; cls = 'rejected'; }
    else if (outcome === 'cancelled' || /ABORT|CANCEL/.test(code)) { label = 'cancelled'; cls = 'rejected'; }
    else if (code === 'TOOL_DENIED') { label = 'denied'; cls = 'rejected'; }
  }
  if (it.name === 'bash' && meta.sandboxDenied) label += ' · sandbox refused';
  if (meta.background && meta.jobId) label = `background ${meta.jobId}`;
  return h('span', { class: `pill ${cls}` }, it.status === 'running' ? h('span', { class: 'spinner', 'aria-hidden': 'true' }) : null, label);
}

function outputBlock(text, cls) {
  const lines = text.split('\n');
  const max = 60;
  if (lines.length <= max) return h('pre', { class: 'out ' + (cls || ''), text });
  const pre = h('pre', { class: 'out ' + (cls || ''), text: lines.slice(0, 20).join('\n') + `\n… ${lines.length - 40} more lines …\n` + lines.slice(-20).join('\n') });
  const more = h('button', { type: 'button', class: 'btn ghost small', text: `Show all ${lines.length} lines`, onclick: () => { pre.textContent = text; more.remove(); } });
  return h('div', null, pre, more);
}

/** toolCard renders a tool call with its status, arguments and result. */
export function toolCard(it) {
  const args = it.args || {};
  const meta = (it.result && it.result.meta) || {};
  const resultText = it.result ? (it.result.content || []).filter((b) => b.type === 'text').map((b) => b.text).join('') : '';
  const summary = toolSummary(it.name, args);
  const card = h('div', { class: `card tool tool-${it.name} st-${it.status}`, 'data-call': it.callId, 'data-tool': it.name });
  const head = h('div', { class: 'card-head' },
    h('span', { class: 'tool-icon', 'aria-hidden': 'true', text: ICONS[it.name] || '⚙' }),
    h('span', { class: 'tool-name', text: it.name }),
    h('span', { class: 'tool-summary', title: summary, text: summary }),
    h('span', { class: 'spacer' }),
    it.result && it.ended && it.time ? h('span', { class: 'muted small', text: fmtDuration(Math.max(0, it.ended - it.time)) }) : null,
    statusPill(it));
  card.append(head);
  const body = h('div', { class: 'card-body' });
  switch (it.name) {
    case 'bash':
      body.append(h('pre', { class: 'cmd' }, h('span', { class: 'prompt', 'aria-hidden': 'true', text: '$ ' }), args.command || ''));
      if (it.result) body.append(outputBlock(resultText.replace(/\n*\[exit code: -?\d+\]\n?/, '\n').trim() || '(no output)', it.status === 'error' ? 'err' : ''));
      break;
    case 'edit': case 'write': case 'str_replace_based_edit_tool': {
      const d = meta.diff || proposedDiff(it.name, args);
      if (d) body.append(diffView(d));
      if (it.result && (it.status === 'error' || !d)) body.append(outputBlock(resultText, it.status === 'error' ? 'err' : ''));
      break;
    }
    case 'web_fetch':
      body.append(h('div', { class: 'kv' }, h('span', { class: 'muted', text: 'URL ' }), extLink(args.url, String(args.url ?? ''))));
      if (meta.status) body.append(h('div', { class: 'kv muted', text: `HTTP ${meta.status} · ${meta.contentType || ''}${meta.title ? ' · ' + meta.title : ''} · ${meta.chars || 0} chars` }));
      if (it.status === 'error') body.append(outputBlock(resultText, 'err'));
      break;
    case 'subagent': case 'subagent_fork': {
      if (args.prompt) body.append(h('details', { class: 'task' }, h('summary', { text: 'Task' }), h('div', { class: 'md' }, markdown(args.prompt))));
      const child = it.child || (meta.childId ? { id: meta.childId, stop: meta.stopReason } : null);
      if (child && child.id) {
        body.append(h('a', { class: 'child-link', href: `#/s/${child.id}`, 'data-child': child.id },
          h('span', { text: 'Open child session ' }), h('code', { text: child.id.slice(0, 12) }),
          child.stop ? h('span', { class: 'muted', text: ` · ${child.stop}` }) : h('span', { class: 'muted', text: ' · running' })));
      }
      if (it.result && resultText) body.append(h('details', null, h('summary', { text: 'Answer' }), h('div', { class: 'md' }, markdown(resultText))));
      break;
    }
    case 'read': case 'glob': case 'grep':
      // The header names the path or pattern; the result stays folded.
      if (it.result && resultText) {
        const lines = meta.totalLines ? `lines ${meta.firstLine}–${meta.lastLine} of ${meta.totalLines}` : meta.total !== undefined ? `${meta.shown ?? meta.total} of ${meta.total}` : 'Result';
        body.append(h('details', { open: it.status === 'error' }, h('summary', { text: lines }), outputBlock(resultText, it.status === 'error' ? 'err' : '')));
      }
      break;
    default:
      if (it.rawArgs && it.rawArgs !== '{}') body.append(h('details', null, h('summary', { text: 'Arguments' }), h('pre', { class: 'out', text: pretty(it.rawArgs) })));
      if (it.result && resultText) body.append(h('details', { open: it.status === 'error' }, h('summary', { text: 'Result' }), outputBlock(resultText, it.status === 'error' ? 'err' : '')));
  }
  if (it.result && it.result.error && it.result.error.reason) body.append(h('div', { class: 'err-line', text: it.result.error.reason }));
  if (it.approval && it.approval.decided && it.approval.decided.outcome === 'allowed-once') {
    body.append(h('div', { class: 'muted small approved', text: `Allowed once${it.approval.decided.by ? ' by the ' + it.approval.decided.by : ''}${it.approval.reason ? ' · ' + it.approval.reason : ''}` }));
  }
  if (!it.result && it.approval && it.approval.decided && it.approval.decided.outcome !== 'allowed-once') {
    const d = it.approval.decided;
    body.append(h('div', { class: 'err-line', text: `Approval ${d.outcome}${d.by ? ' by ' + d.by : ''}${d.feedback ? ': ' + d.feedback : d.reason ? ': ' + d.reason : ''}` }));
  }
  if (body.childNodes.length) card.append(body);
  return card;
}

function pretty(raw) {
  try { return JSON.stringify(JSON.parse(raw), null, 2); } catch { return String(raw); }
}

const ANSWER_PILL = {
  answered: ['ok', 'answered'], cancelled: ['rejected', 'cancelled'], unavailable: ['error', 'nobody to ask'],
};

/**
 * questionCard renders a question or plan of the log: what was asked,
 * the options with the chosen ones marked, and how it was answered.
 */
export function questionCard(it) {
  const a = it.answer;
  const plan = it.ask === 'plan';
  let pill = a ? ANSWER_PILL[a.status] || ['', a.status] : it.stale ? ['rejected', 'not answered'] : ['awaiting q', 'waiting for you'];
  if (plan && a && a.status === 'answered') pill = a.approved ? ['ok', 'approved'] : ['awaiting', 'kept planning'];
  const first = (it.questions || [])[0] || {};
  const summary = plan ? 'Plan for your review' : first.header || first.question || '';
  const card = h('div', { class: `card qcard ${plan ? 'plan' : 'ask'} ${a ? 'done' : 'open'}`, 'data-question': it.id },
    h('div', { class: 'card-head' },
      h('span', { class: 'tool-icon q-icon', 'aria-hidden': 'true', text: plan ? '◇' : '?' }),
      h('span', { class: 'tool-name', text: plan ? 'Plan' : (it.questions || []).length > 1 ? `${it.questions.length} questions` : 'Question' }),
      h('span', { class: 'tool-summary', title: summary, text: plan ? '' : summary }),
      h('span', { class: 'spacer' }),
      h('span', { class: `pill ${pill[0]}`, text: pill[1] })));
  // While it waits, the card below the conversation shows it in full.
  if (!a && !it.stale) {
    card.append(h('div', { class: 'card-body muted small', text: plan ? 'Review the plan below.' : 'Answer below.' }));
    return card;
  }
  const body = h('div', { class: 'card-body' });
  if (plan) {
    // The approved plan stays open; one sent back is folded away.
    body.append(h('details', { class: 'plan-doc', open: !!(a && a.approved) }, h('summary', { text: 'The plan' }), h('div', { class: 'md plan-md' }, markdown(it.plan || ''))));
    if (a && a.feedback) body.append(h('div', { class: 'q-feedback' }, h('span', { class: 'muted', text: 'Your feedback: ' }), a.feedback));
  } else {
    for (const q of it.questions || []) {
      const got = (a && a.answers && a.answers[q.id]) || [];
      const labels = new Set((q.options || []).map((o) => o.label));
      const block = h('div', { class: 'q-done' },
        q.header ? h('div', { class: 'q-header', text: q.header }) : null,
        h('div', { class: 'q-text', text: q.question }));
      const ul = h('ul', { class: 'q-opts' });
      for (const o of q.options || []) {
        const chosen = got.includes(o.label);
        ul.append(h('li', { class: chosen ? 'chosen' : '', 'data-label': o.label }, h('span', { class: 'q-mark', 'aria-hidden': 'true', text: chosen ? '✓' : '' }),
          h('span', { text: o.label }), chosen ? h('span', { class: 'sr-only', text: ' (chosen)' }) : null));
      }
      for (const g of got.filter((x) => !labels.has(x))) {
        ul.append(h('li', { class: 'chosen', 'data-label': g }, h('span', { class: 'q-mark', 'aria-hidden': 'true', text: '✓' }), h('span', { class: 'muted', text: 'Other: ' }), h('span', { text: g })));
      }
      block.append(ul);
      body.append(block);
    }
  }
  card.append(body);
  return card;
}

const END_TEXT = {
  aborted: 'Turn cancelled', error: 'Turn failed', interrupted: 'Turn interrupted (dsh stopped)',
  'max-tokens': 'Stopped at the output token limit', blocked: 'Turn blocked by a hook',
};

/** item renders one timeline item as an <li>. */
export function renderItem(it) {
  const li = h('li', { class: `item item-${it.kind}`, 'data-key': it.key });
  switch (it.kind) {
    case 'user':
      li.append(h('div', { class: 'bubble user' }, h('div', { class: 'md' }, markdown(it.text)),
        ...(it.images || []).map((b) => h('img', { class: 'thumb', alt: 'attached image', src: `data:${b.mediaType};base64,${b.data}` }))));
      break;
    case 'task':
      li.append(h('div', { class: 'bubble task' }, h('div', { class: 'label', text: 'Task from the parent agent' }), h('div', { class: 'md' }, markdown(it.text))));
      break;
    case 'context': {
      const s = it.source || {};
      const name = [s.plugin || s.kind, s.form].filter(Boolean).join(' · ');
      li.append(h('details', { class: 'context-note' }, h('summary', { text: `Context added: ${name || 'note'}` }), h('pre', { class: 'out', text: it.text })));
      break;
    }
    case 'assistant': {
      const wrap = h('div', { class: 'assistant' });
      for (const b of it.blocks) {
        if (!b) continue;
        if (b.type === 'reasoning') {
          if (!b.text.trim()) continue;
          wrap.append(h('details', { class: 'reasoning' }, h('summary', { text: it.streaming && !it.blocks.some((x) => x && x.type === 'text' && x.text) ? 'Thinking…' : 'Reasoning' }), h('div', { class: 'reasoning-text', text: b.text })));
        } else if (b.text) {
          wrap.append(h('div', { class: 'md answer' }, markdown(b.text)));
        }
      }
      if (it.streaming && it.preparing) wrap.append(h('div', { class: 'muted small', text: `Preparing ${it.preparing}…` }));
      if (it.streaming) {
        // The caret follows the last word: inside the last paragraph or item.
        const answers = wrap.querySelectorAll('.answer');
        let at = answers.length ? answers[answers.length - 1].lastElementChild : null;
        while (at && (at.tagName === 'UL' || at.tagName === 'OL')) at = at.lastElementChild;
        (at && at.tagName !== 'PRE' ? at : wrap).append(h('span', { class: 'caret', 'aria-hidden': 'true' }));
      }
      if (it.interrupted) wrap.append(h('div', { class: 'interrupted', text: 'Answer interrupted — the text above was kept.' }));
      // A step that only called tools shows nothing of its own.
      if (!wrap.childNodes.length) li.hidden = true;
      li.append(wrap);
      break;
    }
    case 'tool':
      // A call that asked the person shows as its question item instead.
      if (it.question) li.hidden = true;
      li.append(toolCard(it));
      break;
    case 'question':
      li.append(questionCard(it));
      break;
    case 'end': {
      const r = it.reason || {};
      let text = END_TEXT[r.kind] || `Turn ended: ${r.kind}`;
      if (r.cause) text += ` (${r.cause === 'user' ? 'by you' : r.cause})`;
      if (r.failure) text += ` — ${r.failure.code}: ${r.failure.message}`;
      li.append(h('div', { class: `turn-end ${r.kind}`, role: 'status', text }));
      break;
    }
    case 'note':
      li.append(h('div', { class: `note ${it.tone || ''}`, text: it.text }));
      break;
  }
  return li;
}
