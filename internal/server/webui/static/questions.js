// questions.js: what the agent asks the person. A pending question
// (ask_user_question) or plan (exit_plan_mode) shows as a card beside the
// approval panel: the options to pick from, or the plan to approve or send
// back with feedback. The card answers through POST
// /api/sessions/{id}/questions/{questionId}; the log's question/answer
// (or the feed's question-resolved) then takes it away in every tab.
import { api } from './api.js';
import { h, markdown } from './render.js';

const $ = (id) => document.getElementById(id);

/**
 * pendingQuestions joins what the log says is asked and not answered with
 * the host's queue (from the feed and GET /questions): a question the
 * log has not shown yet still appears, one the log answered does not.
 */
export function pendingQuestions(model, host) {
  const out = model.pendingQuestions().map((q) => ({ id: q.id, kind: q.ask, questions: q.questions, plan: q.plan }));
  for (const q of (host || new Map()).values()) {
    const logged = model.questions.get(q.id);
    if (!logged) out.push({ id: q.id, kind: q.kind, questions: q.questions || [], plan: q.plan || '' });
  }
  return out;
}

/** paintQuestions draws the first pending question, or hides the card. */
export function paintQuestions(sessionId, list, onAnswered, toast) {
  const panel = $('question');
  if (!list.length) {
    const hadFocus = panel.contains(document.activeElement);
    panel.hidden = true;
    panel.replaceChildren();
    delete panel.dataset.question;
    delete panel.dataset.key;
    if (hadFocus && !$('composer').hidden) $('composer-input').focus();
    return;
  }
  const q = list[0];
  // Rebuilt only when what it shows changes, so choices and typed text
  // survive unrelated redraws.
  const key = `${q.id}:${list.length}`;
  if (panel.dataset.key === key && !panel.hidden) return;
  panel.dataset.key = key;
  panel.dataset.question = q.id;
  panel.dataset.kind = q.kind;
  const send = async (body) => {
    panel.querySelectorAll('button, input, textarea').forEach((b) => { b.disabled = true; });
    try {
      await api.answerQuestion(sessionId, q.id, body);
      onAnswered(q.id);
    } catch (err) {
      toast(err.code === 'QUESTION_NOT_PENDING' ? 'This question was already answered.' : err.message);
      panel.querySelectorAll('button, input, textarea').forEach((b) => { b.disabled = false; });
      if (err.code === 'QUESTION_NOT_PENDING') onAnswered(q.id);
    }
  };
  const more = list.length > 1 ? h('span', { class: 'muted', text: `1 of ${list.length}` }) : null;
  panel.replaceChildren(...(q.kind === 'plan' ? planReview(q, more, send) : questionForm(q, more, send)));
  panel.hidden = false;
  panel.scrollIntoView({ block: 'nearest' });
}

function head(icon, title, more) {
  return h('div', { class: 'approval-head' },
    h('span', { class: 'approval-icon ask-icon', 'aria-hidden': 'true', text: icon }),
    h('h2', { id: 'question-title', text: title }), more);
}

// questionForm: one fieldset per item, radio buttons (or checkboxes for a
// multi-select item) with descriptions, and an "Other" answer typed in.
function questionForm(q, more, send) {
  const items = q.questions || [];
  const form = h('form', { class: 'q-form', id: 'question-form' });
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'question-send', disabled: true }, items.length > 1 ? 'Send answers' : 'Send answer');
  const readers = [];
  items.forEach((it, n) => {
    const name = `q-${n}`;
    const type = it.multiSelect ? 'checkbox' : 'radio';
    const fs = h('fieldset', { class: 'q-item', 'data-item': it.id },
      h('legend', null, it.header ? h('span', { class: 'q-header', text: it.header }) : null, h('span', { class: 'q-text', text: it.question })),
      it.multiSelect ? h('div', { class: 'muted small', text: 'Choose any that apply.' }) : null);
    const opts = h('div', { class: 'q-options', role: it.multiSelect ? 'group' : 'radiogroup' });
    (it.options || []).forEach((o, i) => {
      const id = `${name}-${i}`;
      opts.append(h('label', { class: 'q-option', for: id },
        h('input', { type, name, id, value: o.label }),
        h('span', { class: 'q-body' }, h('span', { class: 'q-label', text: o.label }), o.description ? h('span', { class: 'q-desc', text: o.description }) : null)));
    });
    const otherBox = h('input', { type, name, id: `${name}-other`, value: '', 'aria-label': 'Other' });
    const otherText = h('input', { type: 'text', class: 'q-other-text', id: `${name}-other-text`, placeholder: 'Other — type your own answer', autocomplete: 'off', 'aria-label': `Other answer to: ${it.question}` });
    // The host takes option labels or one typed answer, never both:
    // typing clears the choices, and a choice clears what was typed.
    otherText.addEventListener('input', () => {
      const typed = otherText.value.trim() !== '';
      if (typed) opts.querySelectorAll('input:checked').forEach((x) => { if (x !== otherBox) x.checked = false; });
      otherBox.checked = typed;
      update();
    });
    otherBox.addEventListener('change', () => {
      if (otherBox.checked) { otherText.focus(); return; }
      otherText.value = '';
      update();
    });
    opts.addEventListener('change', (e) => {
      if (e.target !== otherBox && e.target.checked && e.target.type !== 'text') { otherBox.checked = false; otherText.value = ''; }
    });
    opts.append(h('label', { class: 'q-option q-other', for: `${name}-other` }, otherBox, h('span', { class: 'q-body' }, otherText)));
    fs.append(opts);
    form.append(fs);
    readers.push(() => {
      const other = otherBox.checked ? otherText.value.trim() : '';
      if (other) return [other];
      const picked = [...opts.querySelectorAll('input:checked')].filter((x) => x !== otherBox).map((x) => x.value);
      return it.multiSelect ? picked : picked.slice(0, 1);
    });
  });
  const answers = () => {
    const out = {};
    items.forEach((it, i) => { out[it.id] = readers[i](); });
    return out;
  };
  const update = () => { submit.disabled = !Object.values(answers()).every((v) => v.length > 0); };
  form.addEventListener('change', update);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!submit.disabled) send({ answers: answers() });
  });
  form.append(h('div', { class: 'row end approval-actions' }, h('span', { class: 'muted small hint-keys', text: 'Your answer goes to the agent, which then continues.' }), h('span', { class: 'spacer' }), submit));
  return [head('?', items.length > 1 ? 'The agent has questions for you' : 'The agent has a question', more), form];
}

// planReview: the plan, rendered, with Approve and Keep planning (which
// asks for feedback).
function planReview(q, more, send) {
  const doc = h('div', { class: 'md plan-md plan-review', tabindex: '0', 'aria-label': 'The proposed plan' }, markdown(q.plan || ''));
  const feedback = h('textarea', { id: 'plan-feedback', rows: '3', placeholder: 'What should change in the plan? The agent keeps planning with this.' });
  const keepBox = h('div', { class: 'reject-box', hidden: true },
    h('label', { for: 'plan-feedback', text: 'Feedback for the agent' }), feedback,
    h('div', { class: 'row end' },
      h('button', { type: 'button', class: 'btn', onclick: () => { keepBox.hidden = true; actions.hidden = false; $('plan-keep').focus(); } }, 'Back'),
      h('button', { type: 'button', class: 'btn primary', id: 'plan-feedback-send', onclick: () => sendFeedback() }, 'Send feedback')));
  const sendFeedback = () => {
    const text = feedback.value.trim();
    if (!text) { feedback.focus(); return; }
    send({ approve: false, feedback: text });
  };
  feedback.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); sendFeedback(); }
  });
  const actions = h('div', { class: 'row end approval-actions' },
    h('span', { class: 'muted small hint-keys', text: 'Approving ends plan mode: the agent may then change files.' }),
    h('span', { class: 'spacer' }),
    h('button', { type: 'button', class: 'btn', id: 'plan-keep', onclick: () => { keepBox.hidden = false; actions.hidden = true; feedback.focus(); } }, 'Keep planning…'),
    h('button', { type: 'button', class: 'btn primary', id: 'plan-approve', onclick: () => send({ approve: true }) }, 'Approve plan'));
  return [head('◇', 'Review the plan', more), doc, keepBox, actions];
}

/**
 * paintPlanMode shows whether the session is in plan mode: the toggle in
 * the composer (pressed while on, "turning on…" until the log says so),
 * a chip in the status strip and the composer's own look.
 */
export function paintPlanMode(active, want) {
  const btn = $('plan-btn');
  const pending = want !== null && want !== undefined && want !== active;
  btn.setAttribute('aria-pressed', String(active));
  btn.classList.toggle('on', active);
  btn.textContent = pending ? (want ? 'Plan mode: turning on…' : 'Plan mode: turning off…') : active ? 'Plan mode: on' : 'Plan mode';
  btn.title = active ? 'Leave plan mode: the agent may change files again' : 'Plan first: the agent explores and proposes a plan, and changes nothing until you approve it';
  $('plan-chip').hidden = !active;
  $('composer').classList.toggle('plan-mode', active);
  $('plan-banner').hidden = !active;
  $('composer-input').placeholder = active ? 'Describe what to plan…' : 'Ask dsh to do something…';
}
