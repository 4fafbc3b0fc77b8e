// attach.js: images attached to the next message — pasted into the
// composer, dropped on it, or picked with the file chooser — shown as
// thumbnails until the message is sent.
import { h } from './render.js';

const $ = (id) => document.getElementById(id);
const MAX_BYTES = 5 << 20; // per image; the server has its own body limit

let pending = []; // {mediaType, data (base64), name}
let onError = () => {};

function render() {
  const box = $('attachments');
  box.replaceChildren(...pending.map((a, i) => h('div', { class: 'attachment' },
    h('img', { src: `data:${a.mediaType};base64,${a.data}`, alt: a.name || 'pasted image' }),
    h('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${a.name || 'image'}`, text: '×', onclick: () => { pending.splice(i, 1); render(); } }))));
  box.hidden = !pending.length;
}

function add(file) {
  if (!file.type.startsWith('image/')) return;
  if (file.size > MAX_BYTES) { onError(`${file.name || 'The image'} is larger than 5 MB.`); return; }
  const reader = new FileReader();
  reader.onload = () => {
    const url = String(reader.result);
    pending.push({ mediaType: file.type, data: url.slice(url.indexOf(',') + 1), name: file.name });
    render();
  };
  reader.readAsDataURL(file);
}

/** setupAttachments wires paste, drop and the file chooser. */
export function setupAttachments(errorToast) {
  onError = errorToast;
  $('composer-input').addEventListener('paste', (e) => {
    const files = [...(e.clipboardData ? e.clipboardData.files : [])].filter((f) => f.type.startsWith('image/'));
    if (!files.length) return;
    e.preventDefault();
    files.forEach(add);
  });
  const composer = $('composer');
  composer.addEventListener('dragover', (e) => { if (e.dataTransfer.types.includes('Files')) e.preventDefault(); });
  composer.addEventListener('drop', (e) => {
    if (!e.dataTransfer.files.length) return;
    e.preventDefault();
    [...e.dataTransfer.files].forEach(add);
  });
  $('attach-btn').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', (e) => { [...e.target.files].forEach(add); e.target.value = ''; });
}

/** takeAttachments returns the images for the message being sent and clears them. */
export function takeAttachments() {
  const out = pending.map(({ mediaType, data }) => ({ mediaType, data }));
  pending = [];
  render();
  return out;
}

/** restoreAttachments puts images back after a failed send. */
export function restoreAttachments(images) {
  pending = images.map((im) => ({ ...im, name: '' })).concat(pending);
  render();
}

/** hasAttachments reports whether an image waits to be sent. */
export function hasAttachments() {
  return pending.length > 0;
}
