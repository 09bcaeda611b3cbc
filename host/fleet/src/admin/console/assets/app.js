// The RustStream console: pages drawn from the admin API's own routes, in the session the
// sign-in opened (an HttpOnly cookie this script never sees). Every change carries the
// session's CSRF token. No inline script or style: the Content-Security-Policy allows none.
'use strict';

const REFRESH_MS = 1000;
const COLORS = ['#b7410e', '#1565c0', '#2e7d32', '#6a1b9a', '#00838f', '#ef6c00', '#5d4037', '#ad1457'];

const state = { csrf: null, caller: null, status: null, history: null, timer: null, page: 'fleet', kept: new Map(), fetched: new Map() };

const $ = (id) => document.getElementById(id);

/** An element with text and attributes; children appended. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === 'text') node.textContent = value;
    else if (name === 'class') node.className = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** A request to the admin API in the session: JSON in and out, its error as one line. */
async function api(method, path, body) {
  const headers = {};
  if (method !== 'GET') headers['X-CSRF-Token'] = state.csrf || '';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {
    method, headers, credentials: 'same-origin', cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let answer = null;
  try { answer = await response.json(); } catch (_) { answer = null; }
  if (response.status === 401 && path !== '/ui/session') {
    signedOut((answer && answer.error) || 'signed out');
  }
  if (!response.ok) throw new Error((answer && answer.error) || `${response.status}`);
  return answer;
}

function signedOut(reason) {
  // The first refusal says why; the requests that were under way with it say no more.
  if (state.caller === null && $('sign-in-error').textContent) return;
  state.csrf = null;
  state.caller = null;
  // Nothing read with this session is shown to the next one.
  state.fetched.clear();
  state.kept.clear();
  clearInterval(state.timer);
  $('nav').hidden = true;
  $('sign-out').hidden = true;
  $('page').hidden = true;
  $('who').textContent = '';
  $('sign-in').hidden = false;
  $('sign-in-error').textContent = reason || '';
}

function signedIn(session) {
  state.csrf = session.csrf;
  state.caller = session;
  $('sign-in').hidden = true;
  $('sign-in-error').textContent = '';
  $('nav').hidden = false;
  $('sign-out').hidden = false;
  $('page').hidden = false;
  $('who').textContent = session.tenant
    ? `tenant ${session.tenant} (token ${session.token_id})`
    : 'operator';
  refresh();
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
}

async function refresh() {
  try {
    const [status, history] = await Promise.all([api('GET', '/v1/status'), api('GET', '/v1/history')]);
    state.status = status;
    state.history = history;
    $('status-line').textContent = `host ${status.owner}: ${status.ready ? 'ready' : 'not ready'} · updated ${new Date().toLocaleTimeString()}`;
    render();
  } catch (error) {
    $('status-line').textContent = `cannot read the host: ${error.message}`;
  }
}

/** Every shard of every subscription, with where it belongs. */
function shards(status) {
  const rows = [];
  for (const tenant of status.tenants) {
    for (const app of tenant.apps) {
      for (const sub of app.subscriptions) {
        for (const shard of sub.shards || []) {
          rows.push({ tenant: tenant.name, app: app.name, subscriber: sub.name, stream: sub.stream, id: shard.shard_id, shard });
        }
      }
    }
  }
  return rows;
}

function seconds(ms) {
  if (ms === null || ms === undefined) return '';
  return (ms / 1000).toFixed(1);
}

function age(sinceMs) {
  if (!sinceMs) return '';
  return `${Math.max(0, Math.round((Date.now() - sinceMs) / 1000))} s`;
}

function table(headings, rows) {
  return el('table', {},
    el('thead', {}, el('tr', {}, ...headings.map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows));
}

function render() {
  // Not under an open question, nor while a field of the page is being filled in: its input
  // would go with the page drawn again.
  if ($('confirm').open) return;
  const focused = document.activeElement;
  if (focused && ['INPUT', 'SELECT'].includes(focused.tagName) && $('content').contains(focused)) return;
  const started = performance.now();
  const content = $('content');
  const page = PAGES[state.page] || PAGES.fleet;
  content.replaceChildren(...page(state.status));
  for (const link of document.querySelectorAll('#nav a')) {
    link.classList.toggle('current', link.dataset.page === state.page);
  }
  // What the console's benchmark reads: how long a page took to draw, and when the first was
  // drawn since the navigation began.
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
  if (!document.body.dataset.firstDrawnMs) document.body.dataset.firstDrawnMs = performance.now().toFixed(1);
}

/** Asks before a change; `extra` holds the inputs it needs. Resolves true on Confirm. */
function confirmChange(text, extra = []) {
  const dialog = $('confirm');
  $('confirm-text').textContent = text;
  $('confirm-extra').replaceChildren(...extra);
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
}

/** A button that asks, then runs `change`, then says how it went. */
function action(label, question, change, extra = () => []) {
  return el('button', {
    type: 'button', text: label, 'data-action': label,
    onclick: async () => {
      const inputs = extra();
      if (!(await confirmChange(question, inputs))) return;
      try {
        await change(inputs);
        $('status-line').textContent = `${label}: done`;
      } catch (error) {
        $('status-line').textContent = `${label}: ${error.message}`;
      }
      refresh();
    },
  });
}

const enc = encodeURIComponent;

const PAGES = {
  fleet(status) {
    const rows = [];
    for (const tenant of status.tenants) {
      for (const app of tenant.apps) {
        const fleet = app.fleet;
        const hosts = (fleet && fleet.running || []).map((h) => `${h.owner}${h.converged ? '' : ' (converging)'}`).join(', ');
        rows.push(el('tr', {},
          el('td', { text: `${tenant.name}/${app.name}` }),
          el('td', { class: 'mono', text: (app.content_hash || '').slice(0, 12) }),
          el('td', { text: fleet ? `revision ${fleet.revision}` : 'this host only' }),
          el('td', { class: fleet && !fleet.converged ? 'warn' : 'ok', text: fleet ? (fleet.converged ? 'converged' : 'converging') : '' }),
          el('td', { text: hosts })));
      }
    }
    // Every live host a subscription's balancing saw (presence rows and live leases), also
    // those that hold nothing, with the shards each holds.
    const holders = new Map();
    for (const tenant of status.tenants) {
      for (const app of tenant.apps) {
        for (const sub of app.subscriptions) {
          for (const [host, held] of Object.entries(sub.hosts || {})) {
            holders.set(host, (holders.get(host) || 0) + held.length);
          }
        }
      }
    }
    return [
      el('h2', { text: 'Fleet' }),
      el('p', { text: `This host: ${status.owner}. ${status.ready ? 'Ready.' : 'Not ready: ' + status.not_ready.join('; ')}` }),
      el('h3', { text: 'Which host holds what' }),
      table(['host', 'shard leases held'], [...holders].map(([host, count]) => el('tr', { 'data-host': host }, el('td', { text: host }), el('td', { class: 'num', text: String(count) })))),
      el('h3', { text: 'Apps across the fleet' }),
      table(['app', 'live', 'desired state', 'state', 'hosts running it'], rows),
    ];
  },

  tenants(status) {
    const rows = status.tenants.map((tenant) => el('tr', { 'data-tenant': tenant.name },
      el('td', { text: tenant.name }),
      el('td', { class: tenant.paused ? 'warn' : 'ok', text: tenant.paused ? `paused (${tenant.pause_reason || ''})` : 'running' }),
      el('td', { class: 'num', text: String(tenant.apps.length) }),
      el('td', {}, tenant.paused
        ? action('Resume', `Resume tenant ${tenant.name}? Its handlers get records again.`, () => api('POST', `/v1/tenants/${enc(tenant.name)}/resume`))
        : action('Pause', `Pause tenant ${tenant.name}? Its handlers get no records until resumed; its checkpoints stop.`, () => api('POST', `/v1/tenants/${enc(tenant.name)}/pause`)))));
    return [el('h2', { text: 'Tenants' }), table(['tenant', 'state', 'apps', ''], rows)];
  },

  apps(status) {
    const out = [el('h2', { text: 'Apps' })];
    for (const tenant of status.tenants) {
      for (const app of tenant.apps) {
        const base = `/v1/tenants/${enc(tenant.name)}/apps/${enc(app.name)}`;
        out.push(el('h3', { text: `${tenant.name}/${app.name} ${app.version} #${(app.content_hash || '').slice(0, 12)}` }));
        if (app.rollout) out.push(el('p', { text: `rollout: ${JSON.stringify(app.rollout)}` }));
        out.push(keptTable(base, app.content_hash));
        const buttons = [
          action('Rollback', `Roll ${tenant.name}/${app.name} back to a kept version?`, ([select]) =>
            api('POST', `${base}/rollback`, select && select.value ? { to: select.value } : {}),
          () => [keptVersions(base)]),
        ];
        for (const sub of app.subscriptions) {
          buttons.push(action(`Seek ${sub.name}`, `Move every shard of ${sub.name} (${sub.stream})?`, ([select]) =>
            api('POST', `${base}/subscriptions/${enc(sub.name)}/seek`, { at: select.value }),
          () => [el('select', {}, el('option', { value: 'latest', text: 'to the tip' }), el('option', { value: 'horizon', text: 'to the oldest record' }))]));
        }
        if (app.shadow) {
          const s = app.shadow;
          out.push(el('p', { text: `shadow ${s.version.version} on ${s.sample_percent}%: ${JSON.stringify(s.counts)}` }));
          if (s.disagreements && s.disagreements.length) {
            out.push(table(['first disagreements'], s.disagreements.slice(0, 5).map((d) => el('tr', {}, el('td', { class: 'mono', text: JSON.stringify(d) })))));
          }
          buttons.push(action('Promote', `Swap the shadow of ${tenant.name}/${app.name} in?`, () => api('POST', `${base}/promote`)));
          buttons.push(action('Abort shadow', `Drop the shadow of ${tenant.name}/${app.name}?`, () => api('DELETE', `${base}/shadow`)));
        }
        out.push(el('p', {}, ...buttons));
      }
    }
    return out;
  },

  shards(status) {
    const rows = shards(status).map((row) => el('tr', { 'data-shard': row.id },
      el('td', { text: `${row.tenant}/${row.app}/${row.subscriber}` }),
      el('td', { text: row.stream }),
      el('td', { class: 'mono', text: row.id }),
      el('td', { text: String(row.shard.state) }),
      el('td', { text: row.shard.owner || '' }),
      el('td', { class: 'mono', text: row.shard.checkpoint || '' }),
      el('td', { class: 'num', text: seconds(row.shard.millis_behind_latest) }),
      el('td', { class: 'mono held', text: row.shard.held_at || '' }),
      el('td', { class: 'num held-age', text: age(row.shard.held_since_ms) }),
      el('td', { class: 'num', text: String(row.shard.copies_pending || 0) }),
      el('td', { text: row.shard.read || '' })));
    return [
      el('h2', { text: 'Shards' }),
      el('div', { class: 'plots' }, plot('Lag per shard (s)', state.history && state.history.lag, 1000), plot('Records per second per app', state.history && state.history.rate, 1)),
      table(['subscription', 'stream', 'shard', 'state', 'owner', 'checkpoint', 'lag (s)', 'held record', 'held for', 'copies pending', 'read'], rows),
    ];
  },

  'dead-letters'(status) {
    const rows = [];
    for (const tenant of status.tenants) {
      for (const app of tenant.apps) {
        let dropped = 0;
        for (const sub of app.subscriptions) for (const shard of sub.shards || []) dropped += (shard.outcomes && shard.outcomes.drop) || 0;
        rows.push(el('tr', {}, el('td', { text: `${tenant.name}/${app.name}` }), el('td', { class: 'num', text: String(dropped) })));
      }
    }
    const stream = el('input', { placeholder: 'dead-letter stream' });
    const own = state.caller && state.caller.tenant;
    return [
      el('h2', { text: 'Dead letters' }),
      table(['app', 'dropped (dead-lettered or dropped)'], rows),
      el('h3', { text: 'Redrive' }),
      el('p', {}, stream, action('Start redrive', 'Write the dead letters back to the streams they came from?', () =>
        api('POST', '/v1/redrives', { stream: stream.value, tenant: own || undefined }).then((progress) => {
          $('status-line').textContent = `redrive ${progress.id || ''} started`;
        }))),
      redriveProgress(),
    ];
  },

  errors(status) {
    const rows = [];
    for (const reason of status.not_ready) rows.push(['host', reason]);
    for (const tenant of status.tenants) {
      if (tenant.pause_reason) rows.push([tenant.name, tenant.pause_reason]);
      for (const refusal of tenant.refused) rows.push([`${tenant.name}/${refusal.component}`, refusal.reason]);
      for (const app of tenant.apps) {
        for (const sub of app.subscriptions) {
          if (sub.error) rows.push([`${tenant.name}/${app.name}/${sub.name}`, sub.error]);
          for (const shard of sub.shards || []) {
            if (String(shard.state).startsWith('failed')) rows.push([`${tenant.name}/${app.name}/${shard.shard_id}`, shard.state]);
          }
        }
      }
    }
    return [el('h2', { text: 'Recent errors' }),
      el('h3', { text: 'Now' }),
      rows.length ? table(['where', 'what'], rows.map(([where, what]) => el('tr', {}, el('td', { text: where }), el('td', { class: 'error', text: what })))) : el('p', { class: 'ok', text: 'None.' }),
      el('h3', { text: 'Logged lately (this host)' }),
      loggedErrors()];
  },

  audit() {
    return [el('h2', { text: 'Audit trail' }), fetched('/v1/audit?limit=200', (list) =>
      table(['when', 'token', 'tenant', 'action', 'target', 'result'],
        list.entries.slice().reverse().map((e) => el('tr', {},
          el('td', { text: e.at }), el('td', { class: 'mono', text: e.token }), el('td', { text: e.tenant || '' }),
          el('td', { text: e.action }), el('td', { text: e.target }),
          el('td', { class: e.result === 'ok' ? 'ok' : 'bad', text: e.error ? `${e.result}: ${e.error}` : e.result })))))];
  },
};

/** A part of a page read from `path` at every drawing: drawn at once from the last answer (so
 * the page does not flicker), then again from the new one. */
function fetched(path, draw, attrs = {}) {
  const holder = el('div', attrs);
  const drawInto = (answer) => holder.replaceChildren(...[].concat(draw(answer)));
  const last = state.fetched.get(path);
  if (last) drawInto(last);
  else holder.append(el('p', { class: 'muted', text: 'reading…' }));
  api('GET', path).then((answer) => {
    state.fetched.set(path, answer);
    drawInto(answer);
  }).catch((error) => holder.replaceChildren(el('p', { class: 'error', text: error.message })));
  return holder;
}

/** The warnings and errors the host logged lately, newest first (a tenant's token reads its own). */
function loggedErrors() {
  return fetched('/v1/errors?limit=200', (list) => list.errors.length
    ? table(['when', 'level', 'about', 'what'], list.errors.map((e) => el('tr', {},
      el('td', { text: e.at }), el('td', { class: e.level === 'ERROR' ? 'bad' : '', text: e.level }),
      el('td', { text: [e.tenant, e.app, e.subscriber, e.stream, e.shard].filter((part) => part).join('/') || 'host' }),
      el('td', { class: 'error', text: e.message }))))
    : el('p', { class: 'ok', text: 'None.' }), { id: 'logged-errors' });
}

/** The redrives the host keeps (whoever started them), with their progress, read again at
 * every drawing. */
function redriveProgress() {
  return fetched('/v1/redrives', (list) => list.redrives.length
    ? table(['redrive', 'stream', 'tenant', 'state', 'redriven', 'skipped', 'error'],
      list.redrives.map((r) => {
        const p = r.progress || {};
        const said = r.running ? 'running' : (p.state || 'to resume');
        const skipped = Object.values(p.skipped || {}).reduce((a, b) => a + b, 0);
        return el('tr', { 'data-redrive': r.id },
          el('td', { class: 'mono', text: r.id }), el('td', { text: r.stream }), el('td', { text: r.tenant || 'every tenant' }),
          el('td', { class: said === 'failed' ? 'bad' : (said === 'finished' ? 'ok' : ''), text: said }),
          el('td', { class: 'num', text: String(p.redriven || 0) }), el('td', { class: 'num', text: String(skipped) }),
          el('td', { class: 'error', text: p.error || '' }));
      }))
    : el('p', { class: 'muted', text: 'No redrives.' }), { id: 'redrives' });
}

/** The versions kept of the app at `base`: read again only when its live version changed. */
function keptTable(base, live) {
  const holder = el('div');
  const key = `${base}@${live}`;
  const draw = (list) => holder.replaceChildren(table(['kept version', 'hash', 'came by', 'live'],
    list.versions.map((v) => el('tr', {},
      el('td', { text: v.version }), el('td', { class: 'mono', text: v.content_hash.slice(0, 12) }),
      el('td', { text: v.came_by }), el('td', { class: v.live ? 'ok' : '', text: v.live ? 'live' : '' })))));
  const cached = state.kept.get(key);
  if (cached) {
    draw(cached);
  } else {
    api('GET', `${base}/versions`).then((list) => { state.kept.set(key, list); draw(list); }).catch(() => {});
  }
  return holder;
}

function keptVersions(base) {
  const select = el('select', {}, el('option', { value: '', text: 'the version the last swap replaced' }));
  api('GET', `${base}/versions`).then((list) => {
    for (const v of list.versions) {
      if (!v.live) select.append(el('option', { value: v.content_hash, text: `${v.version} #${v.content_hash.slice(0, 12)} (${v.came_by})` }));
    }
  }).catch(() => {});
  return select;
}

/** A plot of `series` ({key, points: [[t_ms, value]]}), values divided by `scale`. */
function plot(title, series, scale) {
  const canvas = el('canvas', { width: '640', height: '180' });
  const legend = el('div', { class: 'legend' });
  const box = el('div', { class: 'plot' }, el('strong', { text: title }), canvas, legend);
  const all = series || [];
  const ctx = canvas.getContext('2d');
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const points = all.flatMap((s) => s.points);
  if (!points.length) {
    legend.textContent = 'no samples yet';
    return box;
  }
  const t0 = Math.min(...points.map((p) => p[0]));
  const t1 = Math.max(...points.map((p) => p[0]), t0 + 1);
  const top = Math.max(1e-9, ...points.map((p) => p[1] / scale));
  ctx.strokeStyle = '#d7dee5';
  ctx.strokeRect(0.5, 0.5, width - 1, height - 1);
  ctx.fillStyle = '#5c6b7a';
  ctx.fillText(top.toFixed(1), 4, 12);
  all.forEach((s, n) => {
    const color = COLORS[n % COLORS.length];
    ctx.strokeStyle = color;
    ctx.beginPath();
    s.points.forEach(([t, v], i) => {
      const x = ((t - t0) / (t1 - t0)) * (width - 8) + 4;
      const y = height - 4 - ((v / scale) / top) * (height - 20);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
    const swatch = el('i');
    swatch.style.background = color;
    legend.append(el('span', {}, swatch, s.key));
  });
  canvas.dataset.points = String(points.length);
  return box;
}

function route() {
  const page = (location.hash || '#/fleet').slice(2);
  state.page = PAGES[page] ? page : 'fleet';
  if (state.status) render();
}

document.addEventListener('DOMContentLoaded', async () => {
  window.addEventListener('hashchange', route);
  route();
  $('sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const session = await api('POST', '/ui/session', { token: $('token').value });
      $('token').value = '';
      signedIn(session);
    } catch (error) {
      $('sign-in-error').textContent = error.message;
    }
  });
  $('sign-out').addEventListener('click', async () => {
    try { await api('DELETE', '/ui/session'); } catch (_) { /* signed out either way */ }
    signedOut('signed out');
  });
  try {
    signedIn(await api('GET', '/ui/session'));
  } catch (_) {
    signedOut('');
  }
});
