// unisched dashboard: reads the /ws/v1 routes (and /ui/mesos/* when a Mesos
// master runs), follows /ws/v1/events/stream for live updates, and redraws.
// Plain JavaScript, no dependencies; every value from the server is put in
// the page as text, never as markup.
'use strict';

(function () {
  // ---- errors: kept where a person and a test can see them ----------------
  const state = { errors: [], refreshes: 0, events: 0, info: null, ready: false };
  window.unischedDashboard = state;

  function reportError(message) {
    state.errors.push(String(message));
    const box = document.getElementById('script-errors');
    if (box) {
      box.hidden = false;
      box.textContent = state.errors.join('\n');
    }
  }
  window.addEventListener('error', (e) => reportError(e.message || e));
  window.addEventListener('unhandledrejection', (e) => reportError(e.reason || e));

  // ---- small helpers -------------------------------------------------------
  const $ = (id) => document.getElementById(id);

  // Builds an element: attrs may hold `class`, `text`, `title`, data-* and
  // other attributes; children are nodes or strings (as text).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') el.textContent = String(v);
      else if (k === 'class') el.className = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function svg(tag, attrs) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  function replace(el, ...children) {
    el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
  }

  async function getJSON(path) {
    const r = await fetch(path, { headers: { Accept: 'application/json' } });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // ---- formatting ----------------------------------------------------------
  function bytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let v = n;
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return `${i === 0 ? v : v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
  }

  // One quantity in its unit: memory in bytes, vcore in milli-cores.
  function quantity(name, v) {
    if (v === undefined || v === null) return 'n/a';
    if (['memory', 'disk', 'ephemeral-storage'].includes(name) || name.startsWith('hugepages-')) return bytes(v);
    if (name === 'vcore') return `${+(v / 1000).toFixed(3)} cores`;
    return String(v);
  }

  // Resource types in display order: memory and vcore first.
  function typesOf(...maps) {
    const names = new Set();
    for (const m of maps) for (const k of Object.keys(m || {})) names.add(k);
    const first = ['memory', 'vcore'].filter((n) => names.has(n));
    const rest = [...names].filter((n) => n !== 'memory' && n !== 'vcore').sort();
    return first.concat(rest);
  }

  function resources(map) {
    const types = typesOf(map);
    if (types.length === 0) return '-';
    return types.map((t) => `${t} ${quantity(t, map[t])}`).join(', ');
  }

  function time(nanos) {
    if (!nanos) return '-';
    return new Date(nanos / 1e6).toLocaleString();
  }

  function badge(text, cls) {
    return h('span', { class: `badge ${cls === undefined ? text : cls}`, text });
  }

  // A bar: `used` of `total`, with a mark at `mark` (guaranteed), labelled.
  function bar(used, total, mark, label) {
    const el = h('div', { class: 'bar', title: label });
    if (total > 0) {
      const w = Math.min(100, (100 * (used || 0)) / total);
      el.append(h('div', { class: 'fill', style: `width:${w}%` }));
      if (mark) el.append(h('div', { class: 'mark', style: `left:${Math.min(100, (100 * mark) / total)}%` }));
    }
    el.append(h('div', { class: 'label', text: label }));
    return el;
  }

  function table(el, headers, rows, empty) {
    const head = h('tr', {}, headers.map((c) => h('th', { text: c })));
    const body = rows.length
      ? rows
      : [h('tr', {}, h('td', { class: 'muted', colspan: headers.length, text: empty }))];
    replace(el, h('thead', {}, head), h('tbody', {}, body));
  }

  // ---- partitions and history ----------------------------------------------
  // The server names a partition `[rm]name` itself when two RMs share the name.
  const partitionKey = (p) => (p.name.startsWith('[') ? p.name : `[${p.clusterId}]${p.name}`);

  function renderPartitions(parts, health) {
    $('no-partitions').hidden = parts.length > 0;
    const cards = parts.map((p) => {
      const apps = p.applications || {};
      const cap = (p.capacity && p.capacity.capacity) || {};
      const used = (p.capacity && p.capacity.usedCapacity) || {};
      const states = Object.keys(apps).filter((s) => s !== 'total').sort();
      return h(
        'div',
        { class: 'card', 'data-partition-card': partitionKey(p) },
        h('h4', {}, `${p.name} `, h('span', { class: 'muted', text: `(${p.clusterId})` }), ' ', badge(p.state || 'Active')),
        h(
          'dl',
          {},
          h('dt', { text: 'nodes' }), h('dd', { text: p.totalNodes || 0 }),
          h('dt', { text: 'applications' }), h('dd', { text: apps.total || 0 }),
          states.map((s) => [h('dt', { text: `  ${s}` }), h('dd', { text: apps[s] })]),
          h('dt', { text: 'allocations' }), h('dd', { text: p.totalContainers || 0 }),
          h('dt', { text: 'node sorting' }), h('dd', { text: (p.nodeSortingPolicy && p.nodeSortingPolicy.type) || '-' }),
          h('dt', { text: 'preemption' }), h('dd', { text: p.preemptionEnabled ? 'on' : 'off' }),
        ),
        h('div', { class: 'bars' }, typesOf(cap).map((t) => bar(used[t], cap[t], 0, `${t}: ${quantity(t, used[t] || 0)} of ${quantity(t, cap[t])}`))),
      );
    });
    if (health) {
      const failing = (health.HealthChecks || []).filter((c) => !c.Succeeded);
      cards.push(
        h(
          'div',
          { class: 'card', id: 'health' },
          h('h4', {}, 'Health ', badge(health.Healthy ? 'healthy' : 'unhealthy', health.Healthy ? 'yes' : 'no')),
          failing.length
            ? h('ul', {}, failing.map((c) => h('li', { text: `${c.Name}: ${c.DiagnosisMessage || c.Description}` })))
            : h('p', { class: 'muted', text: `${(health.HealthChecks || []).length} checks pass` }),
        ),
      );
    }
    replace($('partitions'), cards);
  }

  // A line chart of [{t (ms), v}] in an SVG drawn here (no chart library).
  function lineChart(el, points) {
    const W = 600;
    const H = 160;
    const pad = { l: 36, r: 8, t: 10, b: 20 };
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img' });
    root.append(svg('line', { class: 'axis', x1: pad.l, y1: H - pad.b, x2: W - pad.r, y2: H - pad.b }));
    root.append(svg('line', { class: 'axis', x1: pad.l, y1: pad.t, x2: pad.l, y2: H - pad.b }));
    if (points.length === 0) {
      const t = svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' });
      t.textContent = 'no samples yet';
      root.append(t);
      replace(el, root);
      return;
    }
    const t0 = points[0].t;
    const t1 = Math.max(points[points.length - 1].t, t0 + 1);
    const vmax = Math.max(1, ...points.map((p) => p.v));
    const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (W - pad.l - pad.r);
    const y = (v) => H - pad.b - (v / vmax) * (H - pad.t - pad.b);
    const coords = points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    if (points.length > 1) {
      root.append(svg('polygon', { class: 'area', points: `${x(t0)},${y(0)} ${coords.join(' ')} ${x(t1)},${y(0)}` }));
      root.append(svg('polyline', { class: 'line', points: coords.join(' ') }));
    }
    const last = points[points.length - 1];
    root.append(svg('circle', { cx: x(last.t), cy: y(last.v), r: 3, fill: 'currentColor' }));
    const label = (tx, ty, text, anchor) => {
      const t = svg('text', { x: tx, y: ty, 'text-anchor': anchor || 'start' });
      t.textContent = text;
      root.append(t);
    };
    label(pad.l - 4, pad.t + 8, String(vmax), 'end');
    label(pad.l - 4, H - pad.b, '0', 'end');
    label(pad.l, H - 4, new Date(t0).toLocaleTimeString());
    label(W - pad.r, H - 4, `${new Date(t1).toLocaleTimeString()}: ${last.v}`, 'end');
    replace(el, root);
  }

  function renderHistory(appHistory, containerHistory, parts) {
    const now = Date.now();
    const series = (records, field, current) => {
      const pts = (records || []).map((r) => ({ t: Math.floor(r.timestamp / 1e6), v: +r[field] }));
      // The server samples once a minute; the current totals end the line.
      pts.push({ t: now, v: current });
      return pts;
    };
    const running = parts.reduce((n, p) => n + ((p.applications && p.applications.Running) || 0), 0);
    const containers = parts.reduce((n, p) => n + (p.totalContainers || 0), 0);
    lineChart($('chart-apps'), series(appHistory, 'totalApplications', running));
    lineChart($('chart-containers'), series(containerHistory, 'totalContainers', containers));
  }

  // ---- one partition: queues, applications, nodes ----------------------------
  function queueRows(q, depth, capacity, rows) {
    const max = q.maxResource || {};
    const guaranteed = q.guaranteedResource || {};
    const allocated = q.allocatedResource || {};
    const pending = q.pendingResource || {};
    const types = typesOf(max, guaranteed, allocated, pending);
    const bars = types.map((t) => {
      const total = max[t] || capacity[t] || 0;
      const text = [`${t}: ${quantity(t, allocated[t] || 0)}`];
      if (guaranteed[t] !== undefined) text.push(`guaranteed ${quantity(t, guaranteed[t])}`);
      text.push(max[t] !== undefined ? `max ${quantity(t, max[t])}` : 'no max');
      return bar(allocated[t] || 0, total, guaranteed[t], text.join(' / '));
    });
    const apps = q.isLeaf ? `${q.runningApps || 0}${q.maxRunningApps ? ` / ${q.maxRunningApps}` : ''}` : '';
    rows.push(
      h(
        'div',
        { class: 'queue', 'data-queue': q.queuename },
        h('div', { class: 'name', style: `padding-left:${depth * 16}px`, title: q.queuename },
          q.queuename.split('.').pop(), q.isLeaf ? '' : ' ▾', q.isManaged ? '' : h('span', { class: 'muted', text: ' (dynamic)' })),
        h('div', {}, badge(q.status || 'n/a')),
        h('div', { class: 'muted', text: apps, title: 'running applications / max' }),
        h('div', { class: 'bars' }, bars.length ? bars : h('span', { class: 'muted', text: 'nothing allocated' })),
        h('div', { class: 'muted', text: Object.keys(pending).length ? `pending ${resources(pending)}` : '' }),
      ),
    );
    for (const c of q.children || []) queueRows(c, depth + 1, capacity, rows);
    return rows;
  }

  function renderQueues(root, capacity) {
    const head = h('div', { class: 'queue head' }, h('div', { text: 'queue' }), h('div', { text: 'status' }),
      h('div', { text: 'apps' }), h('div', { text: 'allocated against guaranteed (mark) and max' }), h('div', { text: 'pending' }));
    return h('div', { class: 'queue-tree' }, head, root ? queueRows(root, 0, capacity, []) : []);
  }

  function lastChange(app) {
    const log = app.stateLog || [];
    return log.length ? log[log.length - 1].time : app.submissionTime;
  }

  function renderApps(apps) {
    const el = h('table', { class: 'apps' });
    const sorted = apps.slice().sort((a, b) => (b.submissionTime || 0) - (a.submissionTime || 0));
    table(
      el,
      ['application', 'queue', 'user', 'state', 'used', 'pending', 'allocations', 'submitted', 'last change'],
      sorted.map((a) =>
        h('tr', { 'data-app': a.applicationID },
          h('td', { text: a.applicationID }), h('td', { text: a.queueName }), h('td', { text: a.user || '-' }),
          h('td', {}, badge(a.applicationState || 'n/a')), h('td', { text: resources(a.usedResource) }),
          h('td', { text: resources(a.pendingResource) }), h('td', { class: 'num', text: (a.allocations || []).length }),
          h('td', { text: time(a.submissionTime) }), h('td', { text: time(lastChange(a)) }))),
      'no applications',
    );
    return el;
  }

  function renderNodes(nodes) {
    const el = h('table', { class: 'nodes' });
    table(
      el,
      ['node', 'host', 'schedulable', 'capacity', 'allocated', 'utilisation', 'allocations'],
      nodes.map((n) => {
        const cap = n.capacity || {};
        const alloc = n.allocated || {};
        const util = typesOf(cap).filter((t) => t === 'memory' || t === 'vcore' || alloc[t] !== undefined)
          .map((t) => bar(alloc[t] || 0, cap[t], 0, `${t} ${(n.utilized && n.utilized[t]) || 0}%`));
        return h('tr', { 'data-node': n.nodeID },
          h('td', { text: n.nodeID }), h('td', { text: n.hostName || '-' }),
          h('td', {}, badge(n.schedulable ? 'yes' : 'draining', n.schedulable ? 'yes' : 'no')),
          h('td', { text: resources(cap) }), h('td', { text: resources(alloc) }),
          h('td', {}, h('div', { class: 'bars' }, util)), h('td', { class: 'num', text: (n.allocations || []).length }));
      }),
      'no nodes',
    );
    return el;
  }

  async function loadPartition(p) {
    const key = encodeURIComponent(partitionKey(p));
    const base = `/ws/v1/partition/${key}`;
    const [root, nodes, apps] = await Promise.all([
      getJSON(`${base}/queues`),
      getJSON(`${base}/nodes`),
      getJSON(`${base}/applications`),
    ]);
    const capacity = (p.capacity && p.capacity.capacity) || {};
    return h(
      'section',
      { class: 'partition', 'data-partition': partitionKey(p) },
      h('h2', {}, `Partition ${p.name} `, h('span', { class: 'muted', text: `of ${p.clusterId}` })),
      h('h3', { text: 'Queues' }), renderQueues(root, capacity),
      h('h3', { text: `Applications (${apps.length})` }), renderApps(apps),
      h('h3', { text: `Nodes (${nodes.length})` }), renderNodes(nodes),
    );
  }

  // ---- the Mesos side --------------------------------------------------------
  function mesosBase(info) {
    const addr = info.mesos.addr;
    const host = info.mesos.unspecified ? location.hostname : addr.slice(0, addr.lastIndexOf(':'));
    return `${location.protocol === 'https:' ? 'http:' : location.protocol}//${host}:${info.mesos.port}`;
  }

  function renderMesosLinks(info) {
    const base = mesosBase(info);
    const paths = ['/state', '/metrics/snapshot', '/master/state', '/master/redirect', '/health'];
    replace($('mesos-links'), h('span', { class: 'muted', text: `${base}: ` }),
      paths.map((p) => h('a', { href: base + p, text: p, 'data-mesos-link': p })));
  }

  const scalar = (r, name) => (r && typeof r[name] === 'number' ? r[name] : 0);
  const mesosRes = (r) => `cpus ${+scalar(r, 'cpus').toFixed(3)}, mem ${scalar(r, 'mem')} MB, disk ${scalar(r, 'disk')} MB`;

  function renderMesos(s) {
    const frameworks = s.frameworks || [];
    const agents = s.slaves || [];
    const names = Object.fromEntries(frameworks.concat(s.completed_frameworks || []).map((f) => [f.id, f.name]));
    const tasks = frameworks.flatMap((f) => (f.tasks || []).concat((f.completed_tasks || []).slice(-20)));
    const offers = frameworks.flatMap((f) => f.offers || []);
    const running = tasks.filter((t) => t.state === 'TASK_RUNNING').length;
    replace($('mesos-summary'), h('div', { class: 'card' }, h('h4', { text: `Mesos ${s.version || ''}` }), h('dl', {},
      h('dt', { text: 'frameworks' }), h('dd', { text: frameworks.length }),
      h('dt', { text: 'agents' }), h('dd', { text: agents.length }),
      h('dt', { text: 'tasks running' }), h('dd', { text: running }),
      h('dt', { text: 'outstanding offers' }), h('dd', { text: offers.length }))));
    table($('mesos-frameworks'), ['framework', 'id', 'roles', 'connected', 'tasks', 'used', 'offered'],
      frameworks.map((f) => h('tr', { 'data-framework': f.id },
        h('td', { text: f.name }), h('td', { text: f.id }), h('td', { text: (f.roles || [f.role]).join(', ') }),
        h('td', {}, badge(f.connected ? 'yes' : 'no')), h('td', { class: 'num', text: (f.tasks || []).length }),
        h('td', { text: mesosRes(f.used_resources) }), h('td', { text: mesosRes(f.offered_resources) }))),
      'no framework has subscribed');
    table($('mesos-agents'), ['agent', 'hostname', 'resources', 'used', 'offered', 'cpu use'],
      agents.map((a) => h('tr', { 'data-agent': a.id },
        h('td', { text: a.id }), h('td', { text: a.hostname }), h('td', { text: mesosRes(a.resources) }),
        h('td', { text: mesosRes(a.used_resources) }), h('td', { text: mesosRes(a.offered_resources) }),
        h('td', {}, bar(scalar(a.used_resources, 'cpus'), scalar(a.resources, 'cpus'), 0,
          `${+scalar(a.used_resources, 'cpus').toFixed(2)} of ${scalar(a.resources, 'cpus')} cpus`)))),
      'no agents');
    table($('mesos-tasks'), ['task', 'name', 'state', 'framework', 'agent', 'resources'],
      tasks.map((t) => h('tr', { 'data-task': t.id },
        h('td', { text: t.id }), h('td', { text: t.name }), h('td', {}, badge(t.state)),
        h('td', { text: names[t.framework_id] || t.framework_id }), h('td', { text: t.slave_id }),
        h('td', { text: mesosRes(t.resources) }))),
      'no tasks');
    table($('mesos-offers'), ['offer', 'framework', 'agent', 'role', 'resources'],
      offers.map((o) => h('tr', { 'data-offer': o.id },
        h('td', { text: o.id }), h('td', { text: names[o.framework_id] || o.framework_id }), h('td', { text: o.slave_id }),
        h('td', { text: (o.allocation_info && o.allocation_info.role) || '-' }), h('td', { text: mesosRes(o.resources) }))),
      'no outstanding offers');
  }

  // ---- refresh ---------------------------------------------------------------
  let refreshing = false;
  let again = false;

  async function refresh() {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      const [parts, appHistory, containerHistory, health] = await Promise.all([
        getJSON('/ws/v1/partitions'),
        getJSON('/ws/v1/history/apps'),
        getJSON('/ws/v1/history/containers'),
        getJSON('/ws/v1/scheduler/healthcheck'),
      ]);
      renderPartitions(parts, health);
      renderHistory(appHistory, containerHistory, parts);
      const sections = await Promise.all(parts.map(loadPartition));
      replace($('partition-details'), sections);
      if (state.info && state.info.mesos) renderMesos(await getJSON('/ui/mesos/state'));
      state.refreshes++;
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
      if (!state.ready) {
        state.ready = true;
        document.body.dataset.ready = 'yes';
      }
    } catch (e) {
      // The server may be restarting: say so and try again on the next tick.
      $('updated').textContent = `not updated: ${e.message}`;
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        setTimeout(refresh, 0);
      }
    }
  }

  // Events arrive in bursts; redraw at most about once a second.
  let pending = null;
  function refreshSoon() {
    if (pending === null) pending = setTimeout(() => { pending = null; refresh(); }, 700);
  }

  // ---- the events stream -------------------------------------------------------
  const named = (table, n) => (table && table[n]) || String(n || 0);

  function showEvent(e) {
    const info = state.info || {};
    const list = $('events');
    const line = [
      new Date((e.timestampNano || 0) / 1e6).toLocaleTimeString(),
      named(info.eventTypes, e.type || 0),
      e.objectID || '',
      named(info.changeTypes, e.eventChangeType || 0),
      named(info.changeDetails, e.eventChangeDetail || 0),
      e.referenceID || '',
      e.message || '',
    ].filter((x) => x !== '').join('  ');
    list.prepend(h('li', { text: line }));
    while (list.children.length > 100) list.lastChild.remove();
  }

  async function followEvents() {
    for (;;) {
      try {
        const r = await fetch('/ws/v1/events/stream?count=30');
        if (!r.ok || !r.body) throw new Error(`events stream: HTTP ${r.status}`);
        setLive(true);
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let nl;
          while ((nl = buffer.indexOf('\n')) >= 0) {
            const text = buffer.slice(0, nl).trim();
            buffer = buffer.slice(nl + 1);
            if (!text) continue;
            const record = JSON.parse(text);
            if (record.InstanceUUID !== undefined) continue;
            state.events++;
            showEvent(record);
            refreshSoon();
          }
        }
      } catch (e) {
        // A dropped stream is not a script error: reconnect below.
      }
      setLive(false);
      await sleep(2000);
    }
  }

  function setLive(on) {
    const el = $('live');
    el.textContent = on ? 'live' : 'reconnecting';
    el.className = `badge ${on ? 'on' : 'off'}`;
  }

  async function start() {
    try {
      state.info = await getJSON('/ui/info');
    } catch (e) {
      state.info = {};
    }
    if (state.info.mesos) {
      $('mesos').hidden = false;
      renderMesosLinks(state.info);
    }
    await refresh();
    setInterval(refresh, 5000);
    followEvents();
  }

  start();
})();
