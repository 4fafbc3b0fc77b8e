// dialog.js: the "New session" dialog — a workspace (registered, or a
// folder added with the directory picker over /api/directories), a model,
// an effort and a permission preset (from /api/config).
import { api } from './api.js';
import { h } from './render.js';

const $ = (id) => document.getElementById(id);

let config = null;
let pickerPath = '';
let pickerParent = '';

function option(value, label, selected) {
  return h('option', { value, selected: selected || null, text: label });
}

async function loadConfig() {
  if (config) return config;
  config = await api.config();
  const models = config.models || [];
  const modelIds = models.map((m) => (typeof m === 'string' ? m : m.id || m.name));
  $('model-select').replaceChildren(...modelIds.map((m) => option(m, m, m === config.defaultModel)));
  if (config.defaultModel && !modelIds.includes(config.defaultModel)) {
    $('model-select').prepend(option(config.defaultModel, config.defaultModel, true));
  }
  const efforts = config.efforts || [];
  $('effort-select').replaceChildren(option('', 'default', true), ...efforts.map((e) => option(e, e)));
  const perms = config.permissions || [];
  const def = config.defaultPermission || (perms.includes('workspace-write') ? 'workspace-write' : perms[0]);
  $('perm-select').replaceChildren(...perms.map((p) => option(p, p, p === def)));
  return config;
}

/** workspaces returns the registered workspaces, or null when the server has no registry. */
async function loadWorkspaces(state, selectPath) {
  const sel = $('ws-select');
  let list = null;
  try {
    list = (await api.workspaces()).workspaces || [];
  } catch (err) {
    if (err.status !== 404) throw err;
  }
  state.workspaces = list;
  const opts = [];
  if (list) {
    for (const w of list) opts.push(option(w.id, `${w.title || w.path} — ${w.path}${w.status === 'missing-dir' ? ' (missing)' : ''}`, w.path === selectPath));
  } else {
    // No registry on this server: offer the directories of known sessions.
    const cwds = [...new Set(state.sessions.map((s) => s.header.cwd))];
    if (selectPath && !cwds.includes(selectPath)) cwds.unshift(selectPath);
    for (const c of cwds) opts.push(option('cwd:' + c, c, c === selectPath));
  }
  sel.replaceChildren(...opts);
  if (!opts.length) sel.append(option('', 'No workspace yet — add a folder', true));
  return list;
}

async function browse(path) {
  const list = $('picker-list');
  let d;
  try {
    d = await api.directories(path);
  } catch (err) {
    $('new-error').textContent = err.message;
    return;
  }
  $('new-error').textContent = '';
  pickerPath = d.path;
  pickerParent = d.parent || '';
  $('picker').dataset.path = d.path;
  $('picker-up').disabled = !pickerParent || pickerParent === d.path;
  const showHidden = $('picker-hidden').checked;
  const entries = (d.entries || []).filter((e) => showHidden || !e.hidden);
  $('picker-input').value = d.path;
  list.replaceChildren(...entries.map((e) => h('li', null,
    h('button', { type: 'button', class: 'dir', 'data-path': e.path, onclick: () => browse(e.path) }, h('span', { class: 'folder-icon', 'aria-hidden': 'true' }), e.name))));
  if (!entries.length) list.append(h('li', { class: 'muted', text: 'No subfolders' }));
}

/** setupDialog wires the dialog; onCreated gets the new session's Info. */
export function setupDialog(state, onCreated, toast) {
  const dlg = $('new-dialog');
  const open = async () => {
    $('new-error').textContent = '';
    $('title-input').value = '';
    $('picker').hidden = true;
    try {
      await Promise.all([loadConfig(), loadWorkspaces(state, state.lastCwd)]);
    } catch (err) {
      toast(err.message);
      return;
    }
    dlg.showModal();
    if (!$('ws-select').value) openPicker();
    else $('ws-select').focus();
  };
  const openPicker = () => {
    $('picker').hidden = false;
    browse(pickerPath || '');
    $('picker-up').focus();
  };
  $('new-session').addEventListener('click', open);
  $('empty-new').addEventListener('click', open);
  $('ws-add').addEventListener('click', openPicker);
  $('picker-up').addEventListener('click', () => pickerParent && browse(pickerParent));
  $('picker-hidden').addEventListener('change', () => browse(pickerPath));
  $('picker-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { e.preventDefault(); browse($('picker-input').value.trim()); }
  });
  $('picker-cancel').addEventListener('click', () => { $('picker').hidden = true; $('ws-add').focus(); });
  $('picker-choose').addEventListener('click', async () => {
    try {
      if (state.workspaces) await api.addWorkspace(pickerPath);
      await loadWorkspaces(state, pickerPath);
      $('picker').hidden = true;
      $('ws-select').focus();
    } catch (err) {
      $('new-error').textContent = err.message;
    }
  });
  $('new-cancel').addEventListener('click', () => dlg.close());
  $('new-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ws = $('ws-select').value;
    if (!ws) { $('new-error').textContent = 'Choose a workspace folder first.'; return; }
    const body = { model: $('model-select').value || undefined, effort: $('effort-select').value || undefined, permission: $('perm-select').value || undefined, title: $('title-input').value.trim() || undefined };
    if (ws.startsWith('cwd:')) body.cwd = ws.slice(4);
    else body.workspaceId = ws;
    $('new-create').disabled = true;
    try {
      const info = await api.createSession(body);
      state.lastCwd = info.header && info.header.cwd;
      state.created.set(info.header.id, { model: body.model && body.model.split('/').pop(), effort: body.effort, permission: body.permission });
      dlg.close();
      onCreated(info);
    } catch (err) {
      $('new-error').textContent = `${err.message}${err.code ? ' (' + err.code + ')' : ''}`;
    } finally {
      $('new-create').disabled = false;
    }
  });
  return { open };
}
