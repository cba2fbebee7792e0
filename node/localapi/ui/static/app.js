// The dashboard's script: forms made from skills' input schemas, calls,
// the live audit stream, and refreshes of the Peers and Activity pages.
// Everything from the node (peer-supplied text included) is put in the
// page with textContent or as a form value, never as markup.

const page = document.body.dataset.page;

// el makes an element with attributes and children (strings become text).
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids) e.append(k);
  return e;
}

function short(s) {
  s = String(s ?? '');
  return s.length > 16 ? s.slice(0, 8) + '…' + s.slice(-6) : s;
}

function clock(t) {
  const d = new Date(t);
  return isNaN(d) ? '' : d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

function bytes(n) {
  for (const [u, s] of [[1 << 30, 'GiB'], [1 << 20, 'MiB'], [1 << 10, 'KiB']]) if (n >= u) return (n / u).toFixed(1) + ' ' + s;
  return n + ' B';
}

async function getJSON(url, init) {
  const r = await fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin', ...init });
  let body = null;
  try { body = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

// Forms from a JSON Schema: one field per property (strings an input,
// numbers a number input, booleans a checkbox, enums a select, anything
// else a JSON textarea), required ones marked.
let fieldSeq = 0;
function schemaFields(container, schema) {
  container.replaceChildren();
  // A peer's card is the peer's words: take only what has the right shape.
  const isObj = v => v !== null && typeof v === 'object' && !Array.isArray(v);
  const props = isObj(schema) && isObj(schema.properties) ? schema.properties : {};
  const required = new Set(isObj(schema) && Array.isArray(schema.required) ? schema.required : []);
  for (const [name, p] of Object.entries(props)) {
    if (!isObj(p)) continue;
    const id = 'f' + (++fieldSeq);
    const type = Array.isArray(p.type) ? p.type.find(t => t !== 'null') : p.type;
    const label = el('label', { for: id, text: name + (required.has(name) ? ' (required)' : '') });
    let input;
    if (Array.isArray(p.enum)) {
      input = el('select', { id, name });
      if (!required.has(name)) input.append(el('option', { value: '', text: '' }));
      for (const v of p.enum) input.append(el('option', { value: JSON.stringify(v), text: String(v) }));
      input.dataset.kind = 'json';
    } else if (type === 'boolean') {
      input = el('input', { id, name, type: 'checkbox' });
      input.dataset.kind = 'boolean';
    } else if (type === 'integer' || type === 'number') {
      input = el('input', { id, name, type: 'number', step: type === 'integer' ? '1' : 'any', required: required.has(name) });
      input.dataset.kind = 'number';
    } else if (type === 'string') {
      input = p.maxLength && p.maxLength <= 200
        ? el('input', { id, name, required: required.has(name), autocomplete: 'off' })
        : el('textarea', { id, name, rows: 3, required: required.has(name) });
      input.dataset.kind = 'string';
    } else {
      input = el('textarea', { id, name, rows: 4, spellcheck: 'false', required: required.has(name), placeholder: type === 'array' ? '[ … ] (JSON)' : '{ … } (JSON)' });
      input.dataset.kind = 'json';
    }
    const wrap = el('div', { class: 'field' }, label, input);
    if (p.description) {
      const hid = id + '-d';
      wrap.append(el('p', { id: hid, class: 'hint', text: p.description }));
      input.setAttribute('aria-describedby', hid);
    }
    container.append(wrap);
  }
}

// fieldArgs reads the fields back into an arguments object.
function fieldArgs(container) {
  const args = {};
  for (const f of container.querySelectorAll('[name]')) {
    const k = f.dataset.kind;
    if (k === 'boolean') { if (f.checked) args[f.name] = true; continue; }
    if (f.value === '') continue;
    if (k === 'number') args[f.name] = Number(f.value);
    else if (k === 'json') {
      try { args[f.name] = JSON.parse(f.value); } catch (e) { throw new Error(`${f.name}: not JSON: ${e.message}`); }
    } else args[f.name] = f.value;
  }
  return args;
}

async function call(peer, skill, args) {
  const out = await getJSON('/v1/call', {
    method: 'POST', headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
    body: JSON.stringify({ peer, skill, arguments: args }),
  });
  if (out.error) throw new Error(`${out.error.message} (code ${out.error.code})`);
  return out.result;
}

function showResult(pre, errEl, result, err) {
  if (err) {
    pre.textContent = '';
    errEl.textContent = err.message;
    errEl.hidden = false;
    return;
  }
  errEl.hidden = true;
  errEl.textContent = '';
  pre.textContent = JSON.stringify(result, null, 2);
}

async function skillsPage() {
  const { skills } = await getJSON('/v1/skills');
  for (const s of skills) {
    const form = [...document.querySelectorAll('form.run')].find(f => f.dataset.skill === s.name);
    if (!form) continue;
    try { schemaFields(form.querySelector('.fields'), s.inputSchema); } catch { /* no fields: the skill takes none we can show */ }
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      const out = form.querySelector('output.result'), errEl = form.querySelector('.error');
      out.textContent = 'Running…';
      try { showResult(out, errEl, await call('', s.name, fieldArgs(form.querySelector('.fields')))); }
      catch (e) { showResult(out, errEl, null, e); }
    });
  }
}

function meshPage() {
  const form = document.getElementById('call');
  const peer = document.getElementById('call-peer'), skill = document.getElementById('call-skill');
  const fields = document.getElementById('call-fields'), raw = document.getElementById('call-args');
  const pre = document.getElementById('call-result'), errEl = document.getElementById('call-error');
  // The input schema of each skill of the agents found, from their buttons
  // (the page carries them: no second search).
  const schemas = new Map();
  for (const b of document.querySelectorAll('button.use-skill')) {
    let schema = null;
    try { schema = JSON.parse(b.dataset.schema || 'null'); } catch { /* no form: raw JSON */ }
    schemas.set(b.closest('li').dataset.peer + ' ' + b.dataset.skill, schema);
  }
  const fill = () => schemaFields(fields, schemas.get(peer.value.trim() + ' ' + skill.value.trim()));
  peer.addEventListener('change', fill);
  skill.addEventListener('change', fill);
  for (const b of document.querySelectorAll('button.use-skill')) {
    b.addEventListener('click', () => {
      peer.value = b.closest('li').dataset.peer;
      skill.value = b.dataset.skill;
      fill();
      skill.focus();
    });
  }
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    pre.textContent = 'Calling…';
    try {
      let args = {};
      if (raw.value.trim()) {
        try { args = JSON.parse(raw.value); } catch (e) { throw new Error('arguments: not JSON: ' + e.message); }
      } else args = fieldArgs(fields);
      showResult(pre, errEl, await call(peer.value.trim(), skill.value.trim(), args));
    } catch (e) { showResult(pre, errEl, null, e); }
  });
}

function auditRow(r) {
  const tr = el('tr', { 'data-skill': r.skill || '', 'data-outcome': r.outcome, 'data-caller': r.caller },
    el('td', {}, el('time', { datetime: r.time, text: clock(r.time) })),
    el('td', {}, el('code', { text: short(r.caller) })),
    el('td', { text: r.via || '' }),
    el('td', { text: r.skill || r.method }),
    el('td', { class: 'outcome-' + r.outcome, text: r.outcome + (r.code ? ` (${r.code})` : '') }),
    el('td', { text: r.threat || '–' }),
    el('td', { text: Number(r.duration_ms || 0).toFixed(1) }),
    el('td', {}, el('code', { text: short(r.trace || '') })));
  return tr;
}

function transferRow(t, partial) {
  const done = partial ? t.have : t.done;
  return el('tr', { 'data-name': t.name, class: partial ? 'partial' : null },
    el('td', { text: t.name || '(from an earlier run)' }),
    el('td', { text: partial ? 'in, stopped' : t.direction }),
    el('td', {}, el('code', { text: short(partial ? t.owner : t.peer) })),
    el('td', {}, el('progress', { value: done, max: t.size || done, 'aria-label': t.name || 'an upload from an earlier run', text: `${done} of ${t.size}` }), ` ${bytes(done)} of ${bytes(t.size)}`),
    el('td', { class: 'resume', text: partial ? `kept for a resume (updated ${new Date(t.updated).toLocaleString()})` : (t.resumed ? `resumed at ${bytes(t.resumed)}` : 'from the start') + (!partial && t.attempt ? `, attempt ${t.attempt}` : '') }));
}

function activityPage() {
  const body = document.querySelector('#audit tbody');
  const live = document.getElementById('live');
  const es = new EventSource('/v1/audit/stream' + location.search);
  es.addEventListener('audit', ev => {
    body.prepend(auditRow(JSON.parse(ev.data)));
    while (body.rows.length > 500) body.deleteRow(-1);
  });
  es.addEventListener('dropped', ev => { live.textContent = `live (${ev.data} lines missed: reload)`; });
  es.onopen = () => { live.textContent = 'live'; };
  es.onerror = () => { live.textContent = 'reconnecting…'; };
  const tbody = document.querySelector('#transfers tbody');
  const refresh = async () => {
    try {
      const t = await getJSON('/v1/transfers');
      tbody.replaceChildren(...t.active.map(x => transferRow(x, false)), ...t.partials.filter(x => !x.active).map(x => transferRow(x, true)));
    } catch { /* the next refresh tries again */ }
  };
  setInterval(refresh, 1000);
}

function peersPage() {
  const conns = document.querySelector('#conns tbody'), hist = document.querySelector('#history tbody');
  const counts = document.getElementById('peer-counts');
  const refresh = async () => {
    let p;
    try { p = await getJSON('/v1/peers'); } catch { return; }
    const c = p.counts;
    counts.textContent = `${c.peers} peers over ${c.conns} connections: ${c.direct} direct, ${c.relayed} relayed.`;
    conns.replaceChildren(...(p.conns.length ? p.conns.map(x => el('tr', { 'data-peer': x.peer },
      el('td', {}, el('code', { title: x.peer, text: short(x.peer) })),
      el('td', { class: 'kind', text: x.relayed ? 'relayed' : 'direct' }),
      el('td', { text: x.transport }), el('td', { text: x.direction }),
      el('td', { text: x.rtt_ms ? x.rtt_ms.toFixed(1) + ' ms' : '–' }),
      el('td', { text: x.opened ? new Date(x.opened).toLocaleString() : '–' }),
      el('td', { text: x.agent || '' }), el('td', {}, el('code', { text: x.remote }))))
      : [el('tr', { class: 'empty' }, el('td', { colspan: 8, text: 'No connections.' }))]));
    hist.replaceChildren(...(p.history || []).map(h => el('tr', { 'data-peer': h.peer },
      el('td', {}, el('code', { title: h.peer, text: short(h.peer) })),
      el('td', { class: 'punch-attempts', text: h.hole_punch.attempts }),
      el('td', { class: 'punch-successes', text: h.hole_punch.successes }),
      el('td', { text: h.hole_punch.last ? new Date(h.hole_punch.last).toLocaleString() + (h.hole_punch.last_error ? ': ' + h.hole_punch.last_error : '') : '–' }),
      el('td', {}, el('ol', { class: 'events' }, ...h.events.map(e => el('li', {},
        el('time', { datetime: e.at, text: clock(e.at) }), ` ${e.kind} ${e.relayed ? 'relayed' : 'direct'} (${e.transport}, ${e.direction})`)))))));
  };
  setInterval(refresh, 1000);
}

function accessPage() {
  const errEl = document.getElementById('keys-error');
  for (const b of document.querySelectorAll('button.revoke')) {
    b.addEventListener('click', async () => {
      const name = b.dataset.key;
      if (!confirm(`Revoke the API key ${name}? Its holders are refused from their next request.`)) return;
      try {
        await getJSON('/v1/keys/' + encodeURIComponent(name), { method: 'DELETE' });
        location.reload();
      } catch (e) { errEl.textContent = e.message; errEl.hidden = false; }
    });
  }
  for (const b of document.querySelectorAll('button.end-session')) {
    b.addEventListener('click', async () => {
      try {
        await getJSON('/v1/sessions/' + encodeURIComponent(b.dataset.session), { method: 'DELETE' });
        location.reload();
      } catch (e) { errEl.textContent = e.message; errEl.hidden = false; }
    });
  }
}

const pages = { skills: skillsPage, mesh: meshPage, activity: activityPage, peers: peersPage, access: accessPage };
if (pages[page]) pages[page]();
