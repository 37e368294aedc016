'use strict';
// kfn dev's web view: renders the state kfn dev sends on one Server-Sent
// Events stream (events), and replays dead letters through kfn dev's
// dead-letter API. Every text from the state goes in as text, never as HTML.

const replaying = new Map(); // dead letter sequence -> error text, or '' while under way
let updates = 0;

// h makes an element: h('td', {class: 'num'}, 'text', child, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'onclick') el.addEventListener('click', v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function num(n, cls) {
  return h('td', { class: 'num' + (n ? (cls ? ' ' + cls : '') : ' zero'), 'data-field': cls || undefined }, n);
}

function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? '' : d.toLocaleTimeString([], { hour12: false });
}

function ms(ns) {
  if (!ns) return '';
  const v = ns / 1e6;
  return v < 10 ? v.toFixed(1) + ' ms' : Math.round(v) + ' ms';
}

function name(ns, n) {
  return h('span', { class: 'id' }, h('span', { class: 'ns' }, ns + '/'), n);
}

function cssName(s) {
  return String(s || '').replace(/[^a-z0-9]+/gi, '-').toLowerCase();
}

function fill(tableId, rows, countId) {
  const table = document.getElementById(tableId);
  table.tBodies[0].replaceChildren(...rows);
  const empty = table.parentElement.querySelector('.empty');
  table.hidden = rows.length === 0;
  if (empty) empty.hidden = rows.length !== 0;
  if (countId) document.getElementById(countId).textContent = rows.length ? String(rows.length) : '';
}

// routeLink is the page a route's GET serves on host, through kfn dev's
// port: its path up to its first pattern ("/api/{**}" is /api/); none for
// a wildcard host, a route without GET or one that refuses.
function routeLink(r, host, port) {
  if (host.startsWith('*.') || !(r.methods || []).includes('GET') || r.refused) return null;
  const cut = r.path.search(/[{*]/);
  const path = cut < 0 ? r.path : r.path.slice(0, cut);
  return 'http://' + host + (port ? ':' + port : '') + path;
}

// renderRoutes shows the APIRule rules that reach a function: methods,
// hosts and path (a link where a browser can follow it), access strategy,
// and why a rule refuses when it does.
function renderRoutes(f, port) {
  return (f.routes || []).map((r) => {
    const hosts = [];
    for (const host of r.hosts || []) {
      if (hosts.length) hosts.push(', ');
      const href = routeLink(r, host, port);
      hosts.push(href ? h('a', { href, target: '_blank', rel: 'noopener' }, host + r.path) : h('span', {}, host + r.path));
    }
    return h('div', { class: 'route', 'data-apirule': r.apiRule, 'data-path': r.path },
      h('span', { class: 'methods' }, (r.methods || []).join(' ')), ' ',
      h('span', { class: 'mono' }, hosts), ' ',
      h('span', { class: 'access' }, r.access),
      r.refused ? h('div', { class: 'warning' }, 'refuses every request: ' + r.refused) : null);
  });
}

function renderFunctions(fns, port) {
  fill('functions', fns.map((f) => {
    const key = f.namespace + '/' + f.name;
    const scaling = f.autoscaled ? f.min + '–' + f.max + ' on backlog' : 'fixed';
    const notes = [];
    if (f.error) notes.push(h('div', { class: 'reason' }, f.error));
    for (const w of f.warnings || []) notes.push(h('div', { class: 'warning' }, w));
    return h('tr', { 'data-key': key, 'data-state': f.state },
      h('td', { class: 'name' }, name(f.namespace, f.name), notes, renderRoutes(f, port)),
      h('td', { class: 'mono' }, f.runtime),
      h('td', { class: 'state' }, h('span', { class: 'badge ' + cssName(f.state) }, f.state)),
      h('td', { class: 'num', 'data-field': 'ready' }, f.ready + '/' + f.replicas),
      h('td', { class: 'muted' }, scaling),
      num(f.backlog, 'backlog'),
      num(f.inFlight, 'in-flight'));
  }), 'functions-count');
}

function renderSubscriptions(subs) {
  fill('subscriptions', subs.map((s) => h('tr', { 'data-key': s.namespace + '/' + s.name, 'data-ready': s.ready },
    h('td', { class: 'name' }, name(s.namespace, s.name), s.ready ? null : h('div', { class: 'reason' }, 'not served')),
    h('td', { class: 'mono' }, (s.types || []).join(', ')),
    h('td', { class: 'mono muted' }, s.sink),
    num(s.backlog, 'backlog'),
    num(s.delivered, 'delivered'),
    num(s.failed, 'failed'),
    h('td', { class: 'num' + (s.deadLettered ? ' failed-count' : ' zero'), 'data-field': 'dead-lettered' }, s.deadLettered),
  )), 'subscriptions-count');
}

async function replay(seq) {
  replaying.set(seq, '');
  render(window.kfnState);
  try {
    const resp = await fetch('../deadletters/' + seq + '/replay', { method: 'POST' });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      replaying.set(seq, body.error || resp.status + ' ' + resp.statusText);
    }
  } catch (err) {
    replaying.set(seq, String(err));
  }
  render(window.kfnState);
}

function renderDeadLetters(letters, more) {
  const present = new Set(letters.map((l) => l.sequence));
  for (const seq of replaying.keys()) if (!present.has(seq)) replaying.delete(seq);
  fill('deadletters', letters.map((l) => {
    const state = replaying.get(l.sequence);
    const why = l.error || (l.status ? 'status ' + l.status : '');
    return h('tr', { 'data-seq': l.sequence },
      h('td', { class: 'num mono' }, l.sequence),
      h('td', { class: 'name' }, name(l.namespace, l.subscription)),
      h('td', {}, h('div', { class: 'mono' }, l.type), h('div', { class: 'mono muted' }, l.id + ' · ' + l.source),
        l.data ? h('div', { class: 'mono muted' }, l.data) : null),
      h('td', { class: 'reason' }, why),
      h('td', { class: 'num' }, l.attempts),
      h('td', { class: 'muted' }, time(l.failedAt)),
      h('td', {},
        h('button', { class: 'replay', 'data-seq': l.sequence, disabled: state === '', onclick: () => replay(l.sequence) },
          state === '' ? 'Replaying…' : 'Replay'),
        state ? h('div', { class: 'replay-error' }, state) : null));
  }), 'deadletters-count');
  document.getElementById('deadletters-more').hidden = !more;
}

function renderEvent(e) {
  const deliveries = (e.deliveries || []).map(renderDelivery);
  const replays = (e.replays || []).map(renderEvent);
  const line = h('div', { class: 'event-line' },
    h('span', { class: 'origin' }, e.origin),
    h('span', { class: 'type mono' }, e.type),
    h('span', { class: 'mono muted' }, e.id),
    h('span', { class: 'muted' }, 'from ' + e.source),
    e.call ? h('span', { class: 'muted' }, 'by ' + e.call.function + ' for ', h('span', { class: 'mono' }, e.call.request)) : null,
    e.stored ? h('span', { class: 'muted' }, time(e.stored)) : null);
  const children = [...deliveries, ...replays];
  if (deliveries.length === 0 && e.origin !== 'replay') {
    children.unshift(h('div', { class: 'waiting' }, 'not delivered: no Subscription takes it, or it waits in the backlog'));
  }
  return h('div', { class: 'event', 'data-id': e.id, 'data-origin': e.origin, 'data-sequence': e.sequence },
    line, children.length ? h('div', { class: 'children' }, children) : null);
}

function renderDelivery(d) {
  const outcome = d.outcome || 'pending';
  const steps = d.steps || [];
  const last = steps[steps.length - 1];
  const chips = steps.map((s) => h('span', {
    class: 'attempt ' + cssName(s.outcome),
    title: 'attempt ' + s.number + ': ' + (s.error || s.outcome) + (s.duration ? ' in ' + ms(s.duration) : ''),
  }, s.status || 'net'));
  const emitted = (d.emitted || []).map(renderEvent);
  return h('div', { class: 'delivery', 'data-subscription': d.namespace ? d.namespace + '/' + d.subscription : '', 'data-outcome': outcome },
    h('div', { class: 'delivery-line' },
      h('span', { class: 'arrow' }, '→'),
      d.subscription ? h('span', { class: 'name' }, d.subscription) : null,
      h('span', { class: 'muted' }, 'to ' + d.function),
      h('span', { class: 'badge ' + cssName(outcome) }, outcome),
      d.attempts ? h('span', { class: 'muted' }, d.attempts === 1 ? '1 attempt' : d.attempts + ' attempts') : null,
      chips.length ? h('span', { class: 'attempts' }, chips) : null,
      last && last.duration ? h('span', { class: 'muted' }, ms(last.duration)) : null,
      d.reason && outcome !== 'delivered' ? h('span', { class: 'reason' }, d.reason) : null),
    emitted.length ? h('div', { class: 'children' }, emitted) : null);
}

function renderChains(chains) {
  const box = document.getElementById('chains');
  box.replaceChildren(...chains.map((c) => h('div', { class: 'chain', 'data-trace': c.traceId || '' },
    h('div', { class: 'chain-head mono' }, c.traceId ? 'trace ' + c.traceId : 'no trace context'),
    c.events.map(renderEvent))));
  box.parentElement.querySelector('.empty').hidden = chains.length !== 0;
  document.getElementById('events-count').textContent = chains.length ? String(chains.length) : '';
}

function render(st) {
  if (!st) return;
  document.getElementById('addr').textContent = st.addr;
  document.getElementById('title').textContent = st.title || 'dev';
  document.title = 'kfn ' + (st.title || 'dev');
  const problems = st.problems || [];
  document.getElementById('problems').hidden = problems.length === 0;
  document.getElementById('problem-list').replaceChildren(...problems.map((p) => h('li', {}, p)));
  renderFunctions(st.functions || [], (st.addr || '').split(':').pop());
  renderSubscriptions(st.subscriptions || []);
  renderDeadLetters(st.deadLetters || [], st.moreDeadLetters);
  renderChains(st.chains || []);
}

function connect() {
  const live = document.getElementById('live');
  const source = new EventSource('events');
  source.addEventListener('open', () => { live.dataset.state = 'live'; live.textContent = 'live'; });
  source.addEventListener('error', () => { live.dataset.state = 'reconnecting'; live.textContent = 'reconnecting'; });
  source.addEventListener('state', (msg) => {
    window.kfnState = JSON.parse(msg.data);
    updates++;
    document.body.dataset.updates = String(updates);
    render(window.kfnState);
  });
}

connect();
