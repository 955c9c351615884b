/* leafd console: reads leafd's JSON pages and draws them. No framework, no
 * network beyond this origin, no inline script (the page's CSP forbids it).
 * IDs stay strings or BigInt from the wire to the screen: never a Number. */
(function () {
  'use strict';

  var TOKEN_KEY = 'leafd.admin_token';
  var SAMPLE_MS = 2000, CACHE_MS = 5000, WINDOW_S = 600;
  var token = sessionStorage.getItem(TOKEN_KEY) || '';
  var state = { health: null, sf: null, about: null, cache: null, db: null, layout: null,
    samples: [], denied: false, tab: 'overview' };
  var nf = new Intl.NumberFormat('en-US');
  var nf1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function fmt(n) { return n === null || n === undefined || isNaN(n) ? '–' : nf.format(n); }
  /* Thousands separators for a decimal string of any length (IDs). */
  function group(s) {
    s = String(s);
    var neg = s.charAt(0) === '-', d = neg ? s.slice(1) : s, out = '';
    while (d.length > 3) { out = ',' + d.slice(-3) + out; d = d.slice(0, -3); }
    return (neg ? '-' : '') + d + out;
  }
  function dur(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return '–';
    if (!isFinite(ms)) return '∞';
    var s = Math.abs(ms) / 1000, sign = ms < 0 ? '-' : '';
    if (s < 1) return sign + Math.round(Math.abs(ms)) + ' ms';
    if (s < 120) return sign + nf1.format(s) + ' s';
    if (s < 7200) return sign + nf1.format(s / 60) + ' min';
    if (s < 172800) return sign + nf1.format(s / 3600) + ' h';
    return sign + nf1.format(s / 86400) + ' days';
  }
  function iso(ms) {
    var d = new Date(Number(ms));
    return isNaN(d.getTime()) ? 'out of range' : d.toISOString();
  }
  function kv(dl, rows) {
    clear(dl);
    rows.forEach(function (r) {
      if (!r) return;
      var dt = el('dt', null, r[0]), dd = el('dd', r[2] || null);
      if (r[1] instanceof Node) dd.appendChild(r[1]); else dd.textContent = r[1];
      if (r[3]) dd.setAttribute('data-k', r[3]);
      dl.appendChild(dt); dl.appendChild(dd);
    });
  }
  function pill(text, kind) { return el('span', 'pill ' + kind, text); }

  /* ---- fetching, with the admin token ---- */

  function AuthError(msg) { this.message = msg; }
  function api(path) {
    var h = {};
    if (token) h.Authorization = 'Bearer ' + token;
    return fetch(path, { headers: h, cache: 'no-store', credentials: 'omit' }).then(function (r) {
      if (r.status === 401 || r.status === 403) {
        askToken(r.status === 401
          ? 'This leafd has an admin token (admin.token): enter it to see its pages.'
          : 'Wrong admin token: leafd refused it (403). Enter the value of admin.token.');
        throw new AuthError('admin token needed');
      }
      var ct = r.headers.get('Content-Type') || '';
      var body = ct.indexOf('json') >= 0 ? r.json() : r.text();
      return body.then(function (b) { return { status: r.status, body: b }; });
    });
  }

  function askToken(msg) {
    state.denied = true;
    $('auth').hidden = false;
    var m = $('auth-msg');
    m.textContent = msg;
    m.className = token ? 'error' : '';
    setStatus(token ? 'Wrong admin token' : 'Admin token needed', true);
    if (document.activeElement !== $('auth-token')) $('auth-token').focus();
  }

  $('auth-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    token = $('auth-token').value.trim();
    $('auth-token').value = '';
    if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
    state.denied = false;
    $('auth').hidden = true;
    setStatus('checking the token…');
    refreshAll();
  });

  function setStatus(text, bad) {
    var s = $('status-line');
    s.textContent = text;
    s.className = 'status-line' + (bad ? ' bad' : '');
  }

  function guard(p) {
    return p.catch(function (e) {
      if (!(e instanceof AuthError)) setStatus('cannot reach leafd: ' + (e && e.message || e), true);
      return null;
    });
  }

  /* ---- /metrics ---- */

  var LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)/;
  function labels(s) {
    var o = {}, re = /([a-zA-Z_]+)="([^"]*)"/g, m;
    while ((m = re.exec(s || ''))) o[m[1]] = m[2];
    return o;
  }
  function parseMetrics(text) {
    var s = { t: Date.now(), segIds: 0, sfIds: 0, segReq: 0, sfReq: 0, c503: {}, rejected: 0,
      dbUp: null, dbErrors: 0, connections: 0, tags: 0 };
    var lines = text.split('\n');
    for (var i = 0; i < lines.length; i++) {
      var ln = lines[i];
      if (ln.charCodeAt(0) === 35 || ln.length === 0) continue;   /* '#' */
      if (ln.lastIndexOf('leafd_segment_ids_issued_total{', 0) === 0) {
        s.segIds += Number(ln.slice(ln.lastIndexOf(' ') + 1));
        continue;
      }
      if (ln.lastIndexOf('leafd_segment_', 0) === 0 && ln.indexOf('{biz_tag=') > 0) continue;
      var m = LINE.exec(ln);
      if (!m) continue;
      var name = m[1], v = Number(m[3]), l;
      switch (name) {
        case 'leafd_snowflake_ids_total': s.sfIds = v; break;
        case 'leafd_http_requests_total':
          l = labels(m[2]);
          if (l.route === 'segment' || l.route === 'leaf_segment') s.segReq += v;
          if (l.route === 'snowflake' || l.route === 'leaf_snowflake') s.sfReq += v;
          break;
        case 'leafd_http_503_total':
          /* Snowflake refusals come from leafd_snowflake_not_served_total. */
          l = labels(m[2]);
          if (l.route !== 'snowflake' && l.route !== 'leaf_snowflake')
            s.c503['http ' + l.route + '|' + l.code] = v;
          break;
        case 'leafd_snowflake_not_served_total':
          l = labels(m[2]);
          if (l.answer === 'refuse') s.c503['snowflake|' + l.code] = v;
          break;
        case 'leafd_http_connections_rejected_total': s.c503['http|too_many_connections'] = v; break;
        case 'leafd_db_up': s.dbUp = v; break;
        case 'leafd_db_errors_total': s.dbErrors = v; break;
        case 'leafd_http_connections': s.connections = v; break;
        case 'leafd_segment_tags': s.tags = v; break;
      }
    }
    return s;
  }

  function sample() {
    return guard(api('/metrics').then(function (r) {
      if (r.status !== 200) return;
      /* With thousands of tags /metrics is megabytes: sample it less often. */
      state.sampleEvery = r.body.length > 1000000 ? 3 * SAMPLE_MS : SAMPLE_MS;
      var s = parseMetrics(r.body), prev = state.samples[state.samples.length - 1];
      if (prev) {
        var dt = (s.t - prev.t) / 1000;
        s.rate = {
          segIds: Math.max(0, (s.segIds - prev.segIds) / dt), sfIds: Math.max(0, (s.sfIds - prev.sfIds) / dt),
          segReq: Math.max(0, (s.segReq - prev.segReq) / dt), sfReq: Math.max(0, (s.sfReq - prev.sfReq) / dt)
        };
      }
      state.samples.push(s);
      while (state.samples.length > 2 && state.samples[0].t < s.t - WINDOW_S * 1000 - SAMPLE_MS) state.samples.shift();
      if (state.tab === 'overview') drawOverviewCharts();
    }));
  }

  /* ---- charts (canvas) ---- */

  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  function drawChart(canvas, series, nowEl, unit) {
    var dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 300, h = canvas.clientHeight || 150;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    }
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    var pts = state.samples.filter(function (s) { return s.rate; });
    var now = Date.now(), span = WINDOW_S * 1000, max = 1;
    if (pts.length) span = Math.min(span, Math.max(60000, now - pts[0].t + SAMPLE_MS));
    var t0 = now - span;
    pts.forEach(function (p) { series.forEach(function (sr) { max = Math.max(max, p.rate[sr.key]); }); });
    max = niceMax(max);
    var left = 8, right = w - 8, top = 16, bottom = h - 18;
    ctx.strokeStyle = '#e4e8ec'; ctx.fillStyle = css('--muted') || '#666'; ctx.lineWidth = 1;
    ctx.font = '11px system-ui, sans-serif';
    for (var g = 0; g <= 4; g++) {
      var y = bottom - (bottom - top) * g / 4;
      ctx.beginPath(); ctx.moveTo(left, y + 0.5); ctx.lineTo(right, y + 0.5); ctx.stroke();
    }
    ctx.fillText(fmt(max) + unit, left + 2, top - 4);
    ctx.fillText('−' + dur(span).replace('.0 ', ' '), left + 2, h - 4);
    ctx.textAlign = 'right'; ctx.fillText('now', right, h - 4); ctx.textAlign = 'left';
    series.forEach(function (sr) {
      ctx.strokeStyle = css(sr.color); ctx.lineWidth = 2; ctx.beginPath();
      pts.forEach(function (p, i) {
        var x = left + (right - left) * (p.t - t0) / (now - t0), yy = bottom - (bottom - top) * p.rate[sr.key] / max;
        if (i === 0) ctx.moveTo(Math.max(left, x), yy); else ctx.lineTo(x, yy);
      });
      ctx.stroke();
      if (pts.length < 30) {
        ctx.fillStyle = css(sr.color);
        pts.forEach(function (p) {
          var x = left + (right - left) * (p.t - t0) / (now - t0), yy = bottom - (bottom - top) * p.rate[sr.key] / max;
          ctx.beginPath(); ctx.arc(x, yy, 2.5, 0, 2 * Math.PI); ctx.fill();
        });
      }
    });
    canvas.setAttribute('data-points', String(pts.length));
    var last = pts[pts.length - 1];
    nowEl.textContent = last ? series.map(function (sr) { return sr.name + ': ' + fmt(Math.round(last.rate[sr.key])) + unit; }).join(' · ')
      : 'sampling /metrics every ' + SAMPLE_MS / 1000 + ' s…';
  }
  function niceMax(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function drawOverviewCharts() {
    drawChart($('chart-ids'), [{ key: 'segIds', color: '--seg', name: 'segment' }, { key: 'sfIds', color: '--sf', name: 'snowflake' }], $('now-ids'), '/s');
    drawChart($('chart-req'), [{ key: 'segReq', color: '--seg', name: 'segment' }, { key: 'sfReq', color: '--sf', name: 'snowflake' }], $('now-req'), '/s');
    draw503();
  }
  function draw503() {
    var tb = $('ov-503').tBodies[0], last = state.samples[state.samples.length - 1];
    clear(tb);
    if (!last) return;
    var ago = null;
    for (var i = state.samples.length - 1; i >= 0; i--) { ago = state.samples[i]; if (ago.t <= last.t - 60000) break; }
    var keys = Object.keys(last.c503).filter(function (k) { return last.c503[k] > 0; }).sort();
    keys.forEach(function (k) {
      var p = k.split('|'), tr = el('tr');
      tr.appendChild(el('td', null, p[0]));
      tr.appendChild(el('td', 'mono', p[1]));
      tr.appendChild(el('td', 'num', fmt(last.c503[k])));
      tr.appendChild(el('td', 'num', fmt(last.c503[k] - ((ago && ago.c503[k]) || 0))));
      tb.appendChild(tr);
    });
    if (!keys.length) {
      var tr = el('tr'), td = el('td', 'note', 'No 503 since start.');
      td.colSpan = 4; tr.appendChild(td); tb.appendChild(tr);
    }
  }

  /* ---- overview ---- */

  function loadOverview() {
    return Promise.all([
      guard(api('/health').then(function (r) { state.health = r.body; })).then(loadSfState),
      state.about ? null : guard(api('/console/about.json').then(function (r) { if (r.status === 200) state.about = r.body; }))
    ]).then(drawOverview);
  }
  /* A mode /health says is off: its pages are not asked for (they answer 404). */
  function modeOff(m) { return !!(state.health && state.health[m] && state.health[m].enabled === false); }
  function loadSfState() {
    var t0 = Date.now();
    if (modeOff('snowflake')) {
      state.sf = { off: true, error: { message: 'snowflake mode is off on this node' } };
      return Promise.resolve();
    }
    return guard(api('/snowflake/state').then(function (r) {
      if (r.status === 200) {
        state.sf = r.body; state.sf.rtt = Date.now() - t0; state.sf.seen = Date.now();
        state.layout = r.body.layout;
      } else {
        state.sf = { off: true, error: r.body };
      }
    }));
  }
  function statusPill(s) {
    return pill(s, s === 'ok' || s === 'up' ? 'ok' : s === 'degraded' ? 'warn' : 'bad');
  }
  function drawOverview() {
    var h = state.health, a = state.about;
    if (!h) return;
    if (!state.denied) setStatus('leafd ' + (a ? a.version : '') + ' · ' + h.status + ' · updated ' + new Date().toLocaleTimeString(), h.status === 'unavailable');
    kv($('ov-server'), [
      ['status', statusPill(h.status), null, 'status'],
      h.reason ? ['reason', h.reason, 'badv'] : null,
      ['version', a ? a.version : '–', null, 'version'],
      ['uptime', dur(h.uptime_ms), null, 'uptime'],
      ['config', a ? (a.config || 'built-in defaults (no file)') : '–', 'mono', 'config'],
      ['admin token', a ? (a.admin_token ? 'required' : 'none (pages open)') : '–']
    ]);
    var sg = h.segment || {}, last = state.samples[state.samples.length - 1];
    kv($('ov-segment'), sg.enabled ? [
      ['status', statusPill(sg.db === 'up' ? (sg.tags_without_ids ? 'degraded' : 'ok') : (sg.tags_without_ids ? 'unavailable' : 'degraded'))],
      ['store', sg.store],
      ['database', statusPill(sg.db), null, 'db'],
      sg.db_error ? ['db error', sg.db_error, 'badv'] : null,
      sg.db_down_for_ms ? ['down for', dur(sg.db_down_for_ms)] : null,
      ['db errors', last ? fmt(last.dbErrors) : '–', last && last.dbErrors ? 'badv' : null, 'dberrors'],
      ['tags', fmt(sg.tags), null, 'tags'],
      ['tags without IDs', fmt(sg.tags_without_ids), sg.tags_without_ids ? 'badv' : null]
    ] : [['status', 'off on this node']]);
    var sh = h.snowflake || {}, sf = state.sf && !state.sf.off ? state.sf : null;
    kv($('ov-snowflake'), sh.enabled ? [
      ['status', statusPill(sh.status)],
      sh.reason ? ['reason', sh.reason, 'badv'] : null,
      ['worker ID', sf ? (sf.worker_id === null ? 'unknown' : String(sf.worker_id)) : '–', null, 'worker'],
      sf && sf.datacenter_id !== undefined ? ['datacenter ID', String(sf.datacenter_id), null, 'datacenter'] : null,
      sf && sf.worker_id_min !== undefined ? ['worker ID range', rangeText(sf), null, 'range'] : null,
      ['source', sf ? sf.source : '–'],
      sf && sf.zk_state && sf.zk_state !== 'none' ? ['ZooKeeper', sf.zk_state + (sf.zk_server ? ' to ' + sf.zk_server : '') + (sf.zk_address ? ' (' + sf.zk_address + ')' : ''), null, 'zk']
        : sf && sf.store && sf.store !== 'zookeeper' ? ['store', sf.store + (sf.last_error ? ' · ' + sf.last_error : ''), sf.last_error ? 'badv' : null, 'store'] : null,
      sf && sf.heartbeat_age_ms !== undefined ? ['heartbeat age', sf.heartbeat_age_ms === null ? 'none yet' : dur(sf.heartbeat_age_ms)] : null
    ] : [['status', 'off on this node']]);
    drawOverviewCharts();
  }

  /* ---- a virtualised table: a window of rows over a tall spacer ---- */

  function VTable(host, cols, rowH, keyOf) {
    this.host = host; this.cols = cols; this.rowH = rowH; this.keyOf = keyOf;
    this.rows = []; this.view = []; this.filter = ''; this.sortCol = 0; this.sortDir = 1;
    var tmpl = cols.map(function (c) { return c.w; }).join(' ');
    var minw = cols.reduce(function (s, c) { return s + (c.min || 80); }, 0);
    this.inner = el('div', 'vt-inner'); this.inner.style.minWidth = minw + 'px';
    this.head = el('div', 'vt-head'); this.head.style.gridTemplateColumns = tmpl;
    this.body = el('div', 'vt-body');
    this.tmpl = tmpl;
    var self = this;
    cols.forEach(function (c, i) {
      var b = el('button', c.num ? 'num' : null, c.label);
      b.type = 'button';
      b.title = 'Sort by ' + c.label;
      b.addEventListener('click', function () { self.sortBy(i); });
      self.head.appendChild(b);
    });
    this.inner.appendChild(this.head); this.inner.appendChild(this.body);
    clear(host); host.appendChild(this.inner);
    this.pool = [];
    host.addEventListener('scroll', function () { self.paint(); }, { passive: true });
    window.addEventListener('resize', function () { self.paint(); });
    this.markSort();
  }
  VTable.prototype.sortBy = function (i) {
    if (this.sortCol === i) this.sortDir = -this.sortDir; else { this.sortCol = i; this.sortDir = this.cols[i].num ? -1 : 1; }
    this.markSort(); this.apply();
  };
  VTable.prototype.markSort = function () {
    var bs = this.head.children;
    for (var i = 0; i < bs.length; i++) bs[i].setAttribute('aria-sort', i === this.sortCol ? (this.sortDir > 0 ? 'ascending' : 'descending') : 'none');
  };
  VTable.prototype.setRows = function (rows) { this.rows = rows; this.apply(); };
  VTable.prototype.setFilter = function (f) { this.filter = f.toLowerCase(); this.apply(); };
  VTable.prototype.apply = function () {
    var f = this.filter, key = this.keyOf, c = this.cols[this.sortCol], dir = this.sortDir;
    var v = f ? this.rows.filter(function (r) { return key(r).toLowerCase().indexOf(f) >= 0; }) : this.rows.slice();
    var get = c.sort;
    v.sort(function (a, b) {
      var x = get(a), y = get(b);
      if (typeof x === 'bigint' || typeof y === 'bigint') { x = BigInt(x); y = BigInt(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * dir || (key(a) < key(b) ? -1 : 1);
    });
    this.view = v;
    this.body.style.height = (v.length * this.rowH) + 'px';
    this.paint(true);
  };
  VTable.prototype.paint = function () {
    var top = Math.max(0, this.host.scrollTop - this.head.offsetHeight), hh = this.host.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / this.rowH) - 5), last = Math.min(this.view.length, Math.ceil((top + hh) / this.rowH) + 5);
    var n = last - first, i;
    while (this.pool.length < n) {
      var r = el('div', 'vt-row'); r.style.gridTemplateColumns = this.tmpl; r.style.height = this.rowH + 'px';
      r.setAttribute('role', 'row');
      for (i = 0; i < this.cols.length; i++) r.appendChild(el('div', this.cols[i].num ? 'num' : null));
      this.pool.push(r);
    }
    for (i = 0; i < this.pool.length; i++) {
      var row = this.pool[i];
      if (i >= n) { if (row.parentNode) this.body.removeChild(row); continue; }
      var data = this.view[first + i];
      row.style.transform = 'translateY(' + ((first + i) * this.rowH) + 'px)';
      row.className = (first + i) % 2 ? 'vt-row odd' : 'vt-row';
      row.setAttribute('data-key', this.keyOf(data));
      for (var k = 0; k < this.cols.length; k++) this.cols[k].cell(row.children[k], data);
      if (!row.parentNode) this.body.appendChild(row);
    }
    if (!this.view.length) {
      if (!this.emptyEl) this.emptyEl = el('div', 'vt-empty', 'Nothing to show.');
      if (!this.emptyEl.parentNode) this.body.appendChild(this.emptyEl);
    } else if (this.emptyEl && this.emptyEl.parentNode) this.body.removeChild(this.emptyEl);
  };

  /* ---- segments (/cache) ---- */

  var prevIssued = new Map(), segTable = null;
  function text(e, t, cls) { e.textContent = t; e.className = cls || ''; }
  function bufCell(i) {
    return function (e, r) {
      if (i < 0) i = r.pos;
      var s = r.segments[i], cur = r.init_ok && r.pos === i, step = s.step || 0;
      var frac = step > 0 ? Math.max(0, Math.min(1, s.idle / step)) : 0;
      clear(e);
      e.className = 'buf' + (cur ? ' cur' : '') + (step > 0 && s.idle === 0 ? ' empty' : '');
      if (step === 0) { e.appendChild(el('span', 'small', 'empty (not loaded)')); return; }
      e.appendChild(el('div', 'vm', group(s.value) + ' / ' + group(s.max)));
      var line = el('div', 'barline'), bar = el('div', 'bar'), fill = el('span');
      fill.style.width = (frac * 100).toFixed(1) + '%';
      bar.appendChild(fill); line.appendChild(bar);
      line.appendChild(el('span', 'small', Math.round(frac * 100) + '% of ' + fmt(step)));
      e.appendChild(line);
      e.title = 'segment ' + i + (cur ? ' (current)' : '') + ': value ' + s.value + ', max ' + s.max + ', step ' + step;
    };
  }
  function lastsMs(r) {
    var s = r.segments[r.pos];
    if (!r.init_ok || !s || !s.step) return NaN;
    if (!r.rate) return Infinity;
    return s.idle / r.rate * 1000;
  }
  var segCols = [
    { label: 'biz_tag', w: 'minmax(9rem, 1.4fr)', min: 150, sort: function (r) { return r.key; }, cell: function (e, r) { text(e, r.key, 'tag'); e.title = r.key; } },
    { label: 'segment 0', w: 'minmax(14rem, 2fr)', min: 230, sort: function (r) { return r.segments[0].idle; }, cell: bufCell(0) },
    { label: 'segment 1', w: 'minmax(14rem, 2fr)', min: 230, sort: function (r) { return r.segments[1].idle; }, cell: bufCell(1) },
    { label: 'next', w: '5.5rem', min: 88, sort: function (r) { return (r.next_ready ? 2 : 0) + (r.loading ? 1 : 0); },
      cell: function (e, r) {
        text(e, !r.init_ok ? 'not loaded' : r.loading ? 'loading…' : r.next_ready ? 'ready' : 'not yet', r.loading ? 'yes' : r.next_ready ? 'yes' : 'no');
        e.title = !r.init_ok ? 'not loaded yet: a tag loads on its first request' : 'next segment ' + (r.next_ready ? 'ready' : r.loading ? 'loading' : 'not loaded yet');
      } },
    { label: 'step / table', w: '9rem', min: 140, num: true, sort: function (r) { return r.step; },
      cell: function (e, r) { text(e, fmt(r.step) + ' / ' + fmt(r.min_step), 'num'); e.title = 'adaptive step ' + r.step + ', leaf_alloc.step ' + r.min_step; } },
    { label: 'loads', w: '4.5rem', min: 70, num: true, sort: function (r) { return r.loads; }, cell: function (e, r) { text(e, fmt(r.loads), 'num'); } },
    { label: 'issued', w: '7rem', min: 100, num: true, sort: function (r) { return r.issued; }, cell: function (e, r) { text(e, fmt(r.issued), 'num'); } },
    { label: 'IDs/s', w: '5.5rem', min: 80, num: true, sort: function (r) { return r.rate || 0; }, cell: function (e, r) { text(e, r.rate === undefined ? '–' : fmt(Math.round(r.rate)), 'num'); } },
    { label: 'lasts', w: '6rem', min: 90, num: true, sort: function (r) { var v = lastsMs(r); return isNaN(v) ? -1 : v; },
      cell: function (e, r) { var v = lastsMs(r); text(e, isNaN(v) ? '–' : isFinite(v) ? dur(v) : 'idle', 'num' + (v < 60000 ? ' badv' : '')); } }
  ];
  var narrowQ = window.matchMedia('(max-width: 700px)');
  var segColsNarrow = [
    { label: 'biz_tag', w: 'minmax(4.5rem, 1fr)', min: 64, sort: segCols[0].sort, cell: segCols[0].cell },
    { label: 'current segment', w: 'minmax(9rem, 2.2fr)', min: 126, sort: function (r) { return r.segments[r.pos].idle; }, cell: bufCell(-1) },
    { label: 'next', w: '4.3rem', min: 60, sort: segCols[3].sort, cell: segCols[3].cell },
    { label: 'lasts', w: '4rem', min: 56, num: true, sort: segCols[8].sort, cell: segCols[8].cell }
  ];
  function makeSegTable() {
    var old = segTable;
    segTable = new VTable($('seg-table'), narrowQ.matches ? segColsNarrow : segCols, 46, function (t) { return t.key; });
    if (old) { segTable.filter = old.filter; segTable.setRows(old.rows); }
  }
  narrowQ.addEventListener('change', function () { if (segTable) makeSegTable(); });
  function loadCache() {
    if (modeOff('segment')) { $('seg-summary').textContent = 'segment mode is off on this node'; return Promise.resolve(); }
    return guard(api('/cache').then(function (r) {
      if (r.status !== 200) { $('seg-summary').textContent = (r.body && r.body.message) || 'segment mode is off'; return; }
      var now = Date.now(), tags = r.body.tags, noIds = 0, loading = 0, issued = 0;
      tags.forEach(function (t) {
        var p = prevIssued.get(t.key);
        if (p && now > p.t) t.rate = Math.max(0, (t.issued - p.issued) * 1000 / (now - p.t));
        else if (p) t.rate = p.rate;
        prevIssued.set(t.key, { issued: t.issued, t: now, rate: t.rate });
        if (t.init_ok && t.available === 0) noIds++;
        if (t.loading) loading++;
        issued += t.issued;
      });
      state.cache = tags;
      if (!segTable) makeSegTable();
      segTable.setRows(tags);
      $('seg-summary').textContent = fmt(tags.length) + ' tags' + (segTable.filter ? ', ' + fmt(segTable.view.length) + ' match' : '') +
        ' · ' + fmt(issued) + ' IDs issued · ' + fmt(loading) + ' loading · ' + fmt(noIds) + ' without IDs';
      $('seg-summary').setAttribute('data-tags', String(tags.length));
    }));
  }
  $('seg-filter').addEventListener('input', function () {
    if (segTable) { segTable.setFilter(this.value); loadCacheSummaryOnly(); }
  });
  function loadCacheSummaryOnly() {
    var s = $('seg-summary'), t = s.textContent.split(' · ');
    t[0] = fmt(segTable.rows.length) + ' tags' + (segTable.filter ? ', ' + fmt(segTable.view.length) + ' match' : '');
    s.textContent = t.join(' · ');
  }

  /* ---- database (/db) ---- */

  var dbTable = null;
  var dbCols = [
    { label: 'biz_tag', w: 'minmax(9rem, 1.5fr)', min: 150, sort: function (r) { return r.biz_tag; }, cell: function (e, r) { text(e, r.biz_tag, 'tag'); e.title = r.biz_tag; } },
    { label: 'max_id', w: 'minmax(11rem, 1fr)', min: 170, num: true, sort: function (r) { return BigInt(r.max_id); }, cell: function (e, r) { text(e, group(r.max_id), 'num'); e.title = r.max_id; } },
    { label: 'step', w: '7rem', min: 100, num: true, sort: function (r) { return r.step; }, cell: function (e, r) { text(e, fmt(r.step), 'num'); } },
    { label: 'update_time', w: '11rem', min: 170, sort: function (r) { return r.update_time || ''; }, cell: function (e, r) { text(e, r.update_time || '–', 'mono'); } },
    { label: 'description', w: 'minmax(10rem, 2fr)', min: 160, sort: function (r) { return r.description || ''; }, cell: function (e, r) { text(e, r.description || ''); e.title = r.description || ''; } }
  ];
  function loadDb() {
    if (modeOff('segment')) { $('db-summary').textContent = 'segment mode is off on this node'; return Promise.resolve(); }
    $('db-summary').textContent = 'reading leaf_alloc…';
    return guard(api('/db').then(function (r) {
      if (r.status !== 200) { $('db-summary').textContent = (r.body && r.body.message) || 'segment mode is off'; return; }
      state.db = r.body;
      if (!dbTable) dbTable = new VTable($('db-table'), dbCols, 34, function (x) { return x.biz_tag; });
      dbTable.setRows(r.body.rows);
      $('db-summary').textContent = fmt(r.body.rows.length) + ' rows · store ' + r.body.store + ' · read ' +
        (r.body.fresh ? 'afresh' : '(stale: the database did not answer in time)') + ' at ' + iso(r.body.read_at_ms);
    }));
  }
  $('db-refresh').addEventListener('click', loadDb);
  $('db-filter').addEventListener('input', function () { if (dbTable) dbTable.setFilter(this.value); });

  /* ---- snowflake ---- */

  var DEFAULT_LAYOUT = { epoch_ms: 1288834974657, timestamp_bits: 41, datacenter_bits: 0, worker_bits: 10, sequence_bits: 12 };
  function layout() { return state.layout || DEFAULT_LAYOUT; }
  function fieldsOf(L) {
    var f = [{ n: 'sign', c: 'sign', bits: 1 }, { n: 'timestamp', c: 'timestamp', bits: L.timestamp_bits }];
    if (L.datacenter_bits > 0) f.push({ n: 'datacenter', c: 'datacenter', bits: L.datacenter_bits });
    f.push({ n: 'worker', c: 'worker', bits: L.worker_bits }, { n: 'sequence', c: 'sequence', bits: L.sequence_bits });
    return f;
  }
  function drawLayout() {
    var L = layout(), host = $('sf-layout'), hi = 63;
    $('gen-dc-wrap').hidden = !L.datacenter_bits;
    clear(host);
    fieldsOf(L).forEach(function (f) {
      var d = el('div', 'field f-' + f.c);
      d.style.flexGrow = String(Math.max(f.bits, 3));
      d.appendChild(el('div', 'b', f.bits + ' bit' + (f.bits > 1 ? 's' : '')));
      d.appendChild(el('div', 'l', f.n + ' ' + (f.bits > 1 ? hi + '–' + (hi - f.bits + 1) : hi)));
      hi -= f.bits;
      host.appendChild(d);
    });
    host.appendChild(el('p', 'note full', 'epoch ' + L.epoch_ms + ' (' + iso(L.epoch_ms) + ') · worker IDs 0–' + fmt(Math.pow(2, L.worker_bits) - 1) +
      (L.datacenter_bits ? ' · datacenters 0–' + fmt(Math.pow(2, L.datacenter_bits) - 1) : '') + ' · ' + fmt(Math.pow(2, L.sequence_bits)) + ' IDs per ms' +
      (L.runs_out ? ' · runs out ' + L.runs_out : '') + (state.layout ? '' : ' · (Leaf\'s default layout: /snowflake/state is not available)')));
  }
  /* The worker IDs this node may hold (snowflake.worker_id_min/_max). */
  function rangeText(sf) {
    var whole = sf.layout && sf.worker_id_min === 0 && sf.worker_id_max === sf.layout.max_worker_id;
    return fmt(sf.worker_id_min) + '–' + fmt(sf.worker_id_max) + (whole ? ' (the whole field)' : '');
  }
  /* What holds this node's worker ID, in words: the fields
   * /snowflake/state gives per source (workerid_lease.c, workerid_zk.c). */
  function leaseText(sf) {
    if (sf.source === 'static') return 'static: snowflake.worker_id, no lease';
    if (!sf.store) return sf.source + ': no shared store; fence cached in ' + sf.cache_file;
    var s = 'held in ' + sf.store + (sf.zk_node ? ' as ' + sf.zk_node : '');
    if (sf.lease_expires_ms) s += ' · lease until ' + iso(sf.lease_expires_ms) + ', renewed every heartbeat';
    else if (sf.store === 'zookeeper') s += ' · snowflake.takeover off: no other node takes it unless released';
    else s += ' · no lease yet';
    return s + (sf.release_on_stop ? ' · released on a clean stop' : '');
  }
  function drawSnowflake() {
    drawLayout();
    var sf = state.sf;
    if (!sf || sf.off) {
      kv($('sf-worker'), [['status', sf && sf.error ? sf.error.message || 'unavailable' : 'loading…']]);
      kv($('sf-clock'), []);
      return;
    }
    var age = Date.now() - sf.seen;
    var offset = sf.clock_ms - (sf.seen - sf.rtt / 2);
    kv($('sf-worker'), [
      ['worker ID', sf.worker_id === null ? 'unknown' : String(sf.worker_id), 'mono', 'worker'],
      sf.datacenter_id !== undefined ? ['datacenter ID', String(sf.datacenter_id), 'mono', 'datacenter'] : null,
      sf.worker_id_min !== undefined ? ['worker ID range', rangeText(sf), 'mono', 'range'] : null,
      ['status', statusPill(sf.status)],
      ['source', sf.source, null, 'source'],
      ['lease', leaseText(sf), null, 'lease'],
      sf.store ? ['fence in ' + sf.store, sf.store_fence_ms ? sf.store_fence_ms + ' (' + iso(sf.store_fence_ms) + ')' : 'none yet', 'mono', 'storefence'] : null,
      sf.store && sf.clock_offset_ms !== undefined ? ['clock − ' + sf.store, sf.clock_offset_ms === null ? 'not measured yet'
        : dur(sf.clock_offset_ms) + ' (round trip ' + dur(sf.clock_rtt_ms) + ')', null, 'storeoffset'] : null,
      ['ip:port', sf.ip + ':' + sf.port],
      ['cache file', sf.cache_file, 'mono'],
      sf.zk_state && sf.zk_state !== 'none' ? ['ZooKeeper', sf.zk_state + (sf.zk_server ? ' to member ' + sf.zk_server : '') + (sf.zk_address ? ' · ' + sf.zk_address : ''), null, 'zkmember'] : null,
      sf.redis_master_name !== undefined ? ['Redis master', (sf.redis_master || 'none yet') + ' (Sentinel name ' + sf.redis_master_name + ')', 'mono', 'redismaster'] : null,
      sf.store_failovers !== undefined ? ['store failovers seen', String(sf.store_failovers), 'mono', 'failovers'] : null,
      sf.heartbeat_age_ms !== undefined ? ['heartbeat age', sf.heartbeat_age_ms === null ? 'none yet' : dur(sf.heartbeat_age_ms + age), null, 'heartbeat'] : ['heartbeat age', 'no heartbeat (static worker ID)', null, 'heartbeat'],
      sf.last_error ? ['last error', sf.last_error, 'badv'] : null
    ]);
    kv($('sf-clock'), [
      ['last timestamp', sf.last_timestamp + ' (' + sf.last_time + ')', 'mono', 'last'],
      ['ahead of clock', dur(Math.max(0, sf.last_timestamp - sf.clock_ms))],
      ['fence', sf.fence + ' (' + sf.fence_time + ')', 'mono', 'fence'],
      ['fence ahead', dur(sf.fence - sf.clock_ms)],
      ['server clock − this browser', dur(offset) + ' (±' + Math.round(sf.rtt / 2) + ' ms)', null, 'offset'],
      ['max backward / borrow', dur(sf.max_backward_ms) + ' / ' + dur(sf.max_borrow_ms)],
      ['fence step', dur(sf.fence_step_ms)],
      ['random sequence start', sf.sequence_random ? 'yes' : 'no']
    ]);
  }

  /* ---- the tool ---- */

  function bitsOf(v, n) { var s = v.toString(2); while (s.length < n) s = '0' + s; return s; }
  function drawBits(host, fields) {
    var d = el('div', 'bits'), hi = fields.reduce(function (s, f) { return s + f.bits; }, 0) - 1;
    fields.forEach(function (f) {
      var box = el('div', 'field f-' + f.c);
      box.appendChild(el('div', 'b', bitsOf(f.v, f.bits)));
      box.appendChild(el('div', 'l', f.n + (f.bits > 1 ? ' ' + hi + '–' + (hi - f.bits + 1) : ' ' + hi)));
      box.title = f.n + ': ' + f.bits + ' bits = ' + f.v.toString();
      hi -= f.bits;
      d.appendChild(box);
    });
    host.appendChild(d);
  }
  function fieldTable(host, rows) {
    var t = el('table', 'plain'), tb = el('tbody');
    t.id = 'parse-fields';
    var hr = el('tr');
    ['field', 'bits', 'value', ''].forEach(function (h) { hr.appendChild(el('th', null, h)); });
    var th = el('thead'); th.appendChild(hr); t.appendChild(th);
    rows.forEach(function (r) {
      var tr = el('tr');
      tr.setAttribute('data-name', r[0]);
      tr.appendChild(el('td', null, r[0]));
      tr.appendChild(el('td', 'num', r[1]));
      var v = el('td', 'num mono', r[2]); v.setAttribute('data-value', r[2]); tr.appendChild(v);
      tr.appendChild(el('td', 'note', r[3] || ''));
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    var w = el('div', 'scroll-x'); w.appendChild(t); host.appendChild(w);
  }
  function splitSnowflake(id, L) {
    var sb = BigInt(L.sequence_bits), wb = BigInt(L.worker_bits), db = BigInt(L.datacenter_bits), tb = BigInt(L.timestamp_bits);
    var mask = function (b) { return (1n << b) - 1n; };
    return {
      seq: id & mask(sb), worker: (id >> sb) & mask(wb), dc: (id >> (sb + wb)) & mask(db),
      ts: (id >> (sb + wb + db)) & mask(tb), sign: id >> 63n
    };
  }
  function parseSnowflake(s, out) {
    var L = layout();
    if (!/^(0|[1-9][0-9]{0,18})$/.test(s)) return err(out, 'Not a snowflake ID: expected a decimal number of at most 19 digits, no sign or leading zero.');
    var id = BigInt(s);
    if (id >= (1n << 63n)) return err(out, 'Not a snowflake ID: above 2^63 − 1 (the sign bit would be set).');
    var p = splitSnowflake(id, L), ms = BigInt(L.epoch_ms) + p.ts;
    out.appendChild(el('p', null, 'Snowflake ID ' + s + ' with this server\'s layout' + (state.layout ? '' : ' (Leaf\'s default: /snowflake/state not available)') + ':'));
    var f = [{ n: 'sign', c: 'sign', bits: 1, v: p.sign }, { n: 'timestamp', c: 'timestamp', bits: L.timestamp_bits, v: p.ts }];
    if (L.datacenter_bits) f.push({ n: 'datacenter', c: 'datacenter', bits: L.datacenter_bits, v: p.dc });
    f.push({ n: 'worker', c: 'worker', bits: L.worker_bits, v: p.worker }, { n: 'sequence', c: 'sequence', bits: L.sequence_bits, v: p.seq });
    drawBits(out, f);
    var rows = [['timestamp', L.timestamp_bits, ms.toString(), iso(ms) + ' (' + p.ts.toString() + ' ms after the epoch)']];
    if (L.datacenter_bits) rows.push(['datacenter_id', L.datacenter_bits, p.dc.toString()]);
    rows.push(['worker_id', L.worker_bits, p.worker.toString()], ['sequence', L.sequence_bits, p.seq.toString()]);
    fieldTable(out, rows);
    var check = el('p', 'note', 'asking leafd\'s decoder…'); check.id = 'parse-check';
    out.appendChild(check);
    guard(api('/snowflake/decode/' + s).then(function (r) {
      if (r.status === 404 && r.body && r.body.error === 'not_found') {
        check.textContent = 'leafd\'s /snowflake/decode is not served on this listener (admin.listen.port): the diagram uses the layout from /snowflake/state.';
        return;
      }
      if (r.status !== 200) { check.textContent = 'leafd\'s /snowflake/decode: ' + ((r.body && r.body.message) || r.status); check.className = 'error'; return; }
      var d = r.body, same = String(d.timestamp) === ms.toString() && String(d.worker_id) === p.worker.toString() &&
        String(d.sequence) === p.seq.toString() && (d.datacenter_id === undefined || String(d.datacenter_id) === p.dc.toString());
      check.textContent = same ? 'leafd\'s /snowflake/decode agrees: ' + d.time : 'leafd\'s /snowflake/decode DISAGREES: ' + JSON.stringify(d);
      check.className = same ? 'note yes' : 'error';
      check.setAttribute('data-agree', same ? 'yes' : 'no');
    }));
  }
  function hexBig(h) { return BigInt('0x' + h); }
  function parseUuid(s, out) {
    var h = s.replace(/-/g, '').toLowerCase();
    var ver = parseInt(h.charAt(12), 16);
    if (ver !== 7) return err(out, 'A UUID of version ' + ver + ': only version 7 carries a time. Nothing to show.');
    var v = hexBig(h), ts = v >> 80n, randA = (v >> 64n) & 0xfffn, variant = (v >> 62n) & 3n, randB = v & ((1n << 62n) - 1n);
    out.appendChild(el('p', null, 'UUIDv7 ' + s.toLowerCase() + ' (RFC 9562):'));
    drawBits(out, [{ n: 'unix_ts_ms', c: 'timestamp', bits: 48, v: ts }, { n: 'ver', c: 'version', bits: 4, v: 7n },
      { n: 'rand_a', c: 'random', bits: 12, v: randA }, { n: 'var', c: 'variant', bits: 2, v: variant }, { n: 'rand_b', c: 'random', bits: 62, v: randB }]);
    fieldTable(out, [['timestamp', 48, ts.toString(), iso(ts)], ['version', 4, '7'], ['rand_a', 12, randA.toString()],
      ['variant', 2, variant.toString(2), variant === 2n ? 'RFC 9562' : 'not RFC 9562'], ['rand_b', 62, randB.toString()]]);
  }
  var CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  function parseUlid(s, out) {
    var u = s.toUpperCase().replace(/[IL]/g, '1').replace(/O/g, '0'), v = 0n;
    for (var i = 0; i < 26; i++) {
      var d = CROCKFORD.indexOf(u.charAt(i));
      if (d < 0) return err(out, 'Not a ULID: "' + s.charAt(i) + '" is not Crockford base32.');
      v = (v << 5n) | BigInt(d);
    }
    if (v >> 128n) return err(out, 'Not a ULID: over 128 bits (the first character must be 0–7).');
    var ts = v >> 80n, rnd = v & ((1n << 80n) - 1n);
    out.appendChild(el('p', null, 'ULID ' + u + ':'));
    drawBits(out, [{ n: 'time', c: 'timestamp', bits: 48, v: ts }, { n: 'randomness', c: 'random', bits: 80, v: rnd }]);
    fieldTable(out, [['timestamp', 48, ts.toString(), iso(ts)], ['randomness', 80, rnd.toString()]]);
  }
  function err(out, msg) { out.appendChild(el('p', 'error', msg)); return null; }
  $('parse-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var s = $('parse-input').value.trim(), kind = $('parse-kind').value, out = $('parse-out');
    clear(out);
    if (!s) return;
    if (kind === 'serial' || kind === 'reveal') return parseAdmin(kind, s, $('parse-name').value.trim(), out);
    if (/^[0-9][0-9,_ ]*$/.test(s)) s = s.replace(/[,_ ]/g, '');   /* pasted with separators */
    if (/^[0-9]+$/.test(s)) parseSnowflake(s, out);
    else if (/^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/.test(s)) {
      parseUuid(s, out); askDecoder('/uuid/decode/', s, out);
    } else if (s.length === 26 && /^[0-9A-Za-z]+$/.test(s)) { parseUlid(s, out); askDecoder('/ulid/decode/', s, out); }
    else if (/^[A-Za-z0-9_]{1,77}$/.test(s)) parseIdString(s, out);
    else err(out, 'Not recognised: a snowflake ID is decimal digits, a UUID 32 hex digits, a ULID 26 base32 characters, an ID string [prefix_] and 11 (base62) or 13 (base32) characters. For a serial or a concealed segment ID pick its kind.');
  });

  /* ---- the tool's calls to leafd's ID and decode routes ---- */

  /* JSON with integers past 2^53 kept exact: bare numbers of 16 or more
   * digits (outside strings) become strings before JSON.parse. */
  function parseJsonBig(t) {
    var o = '', i = 0, n = t.length;
    while (i < n) {
      var ch = t.charAt(i);
      if (ch === '"') {
        var j = i + 1;
        while (j < n && t.charAt(j) !== '"') j += t.charAt(j) === '\\' ? 2 : 1;
        o += t.slice(i, j + 1); i = j + 1;
      } else if (/[-0-9]/.test(ch)) {
        var m = /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/.exec(t.slice(i, i + 400))[0];
        o += /^-?[0-9]{16,}$/.test(m) ? '"' + m + '"' : m; i += m.length;
      } else { o += ch; i++; }
    }
    return JSON.parse(o);
  }
  /* GET path with the admin token in the header (never the URL): resolves
   * to {status, body} for every answer. 401 and a wrong token also bring up
   * the token prompt; 403 admin_required (no token and no admin listener on
   * the node) is the caller's to explain. */
  function toolApi(path) {
    var h = {};
    if (token) h.Authorization = 'Bearer ' + token;
    return fetch(path, { headers: h, cache: 'no-store', credentials: 'omit' }).then(function (r) {
      return r.text().then(function (t) {
        var body = t;
        if ((r.headers.get('Content-Type') || '').indexOf('json') >= 0) {
          try { body = parseJsonBig(t); } catch (e) { body = { error: 'bad_json', message: 'an answer the page cannot read' }; }
        }
        /* unauthorized / forbidden: the admin token; token_required /
         * token_forbidden are the ID routes' scoped tokens (auth file). */
        if (r.status === 401 && body && body.error === 'unauthorized') askToken('This route needs the admin token (admin.token): enter it, then try again.');
        else if (r.status === 403 && body && body.error === 'forbidden') askToken('Wrong admin token: leafd refused it (403). Enter the value of admin.token.');
        return { status: r.status, body: body };
      });
    }, function (e) { return { status: 0, body: { error: 'unreachable', message: 'cannot reach leafd: ' + (e && e.message || e) } }; });
  }
  var ERROR_HELP = {
    admin_required: 'This node has neither admin.token nor an admin listener (admin.listen.port): it never decodes concealed values on the public port alone. Set one of them.',
    unauthorized: 'This route needs the admin token: enter it in the prompt above.',
    forbidden: 'leafd refused the admin token: enter the right one in the prompt above.',
    token_required: 'This node\'s ID routes need a token with a scope for them (its tokens file); the console sends only the admin token, so generate IDs with a client that has one.',
    token_forbidden: 'This node\'s tokens file gives the admin token no scope for this route; generate IDs with a client whose token has one.'
  };
  /* A route's JSON error, shown whole: status, code, message, and what to do. */
  function showError(out, what, r, hint) {
    var b = r.body && typeof r.body === 'object' ? r.body : { error: 'http_' + r.status, message: String(r.body || '').slice(0, 300) };
    var box = el('div', 'tool-error');
    box.setAttribute('data-status', String(r.status));
    box.setAttribute('data-error', String(b.error || ''));
    box.appendChild(el('p', 'error', what + ': leafd answered ' + (r.status ? r.status + ' ' : '') + (b.error || 'an error')));
    if (b.message) box.appendChild(el('p', 'mono', b.message));
    var help = ERROR_HELP[b.error] || hint;
    if (help) box.appendChild(el('p', 'note', help));
    out.appendChild(box);
    return null;
  }
  /* A decode route's JSON as a list of its fields. */
  function showFields(out, title, body, id) {
    var box = el('div', 'decoded'), dl = el('dl');
    if (id) box.id = id;
    box.appendChild(el('p', null, title));
    kv(dl, Object.keys(body).map(function (k) {
      var v = body[k];
      return [k, v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v), 'mono', k];
    }));
    box.appendChild(dl);
    out.appendChild(box);
  }
  function askDecoder(route, s, out) {
    var host = el('div');
    out.appendChild(host);
    return toolApi(route + encodeURIComponent(s)).then(function (r) {
      if (r.status === 200) showFields(host, 'leafd\'s ' + route + ':', r.body, 'parse-server');
      else showError(host, route, r, r.status === 404 ? 'This listener does not serve ' + route + ' (the admin listener serves only its pages).' : null);
    });
  }
  /* An ID string: a segment tag's prefix or snowflake.prefix; without a
   * prefix either one, so leafd is asked both ways. */
  function parseIdString(s, out) {
    var note = el('p', 'note', 'asking leafd\'s decoders…');
    out.appendChild(note);
    var seg = toolApi('/segment/decode/' + encodeURIComponent(s)), sf = toolApi('/snowflake/decode/' + encodeURIComponent(s));
    return Promise.all([seg, sf]).then(function (rs) {
      var rseg = rs[0], rsf = rs[1];
      note.remove();
      if (rseg.status === 200) {
        showFields(out, rseg.body.biz_tag ? 'A segment ID string of tag ' + rseg.body.biz_tag + ' (/segment/decode):'
          : 'As a segment ID string, without a prefix (/segment/decode):', rseg.body, 'parse-server');
      }
      if (rsf.status === 200) {
        out.appendChild(el('p', 'note', (rseg.status === 200 && !rseg.body.biz_tag ? 'Or, ' : '') + 'as a snowflake ID string (/snowflake/decode): the number ' + rsf.body.id));
        parseSnowflake(String(rsf.body.id), out);
      }
      if (rseg.status !== 200 && rsf.status !== 200) {
        showError(out, '/segment/decode', rseg);
        showError(out, '/snowflake/decode', rsf, 'For a serial or a concealed segment ID, pick its kind and give the code or biz_tag.');
      }
    });
  }
  var TAG_RE = /^[A-Za-z0-9._:-]{1,128}$/, CODE_RE = /^[A-Za-z0-9_-]{1,32}$/;
  /* The admin-only decoders: /serial/decode/<code>/<serial> and
   * /segment/reveal/<tag>/<id>. */
  function parseAdmin(kind, s, name, out) {
    var serial = kind === 'serial';
    if (serial ? !CODE_RE.test(name) : !TAG_RE.test(name))
      return err(out, serial ? 'Give the serial\'s code: 1 to 32 characters of A–Z a–z 0–9 _ -.' : 'Give the biz_tag: 1 to 128 characters of A–Z a–z 0–9 . _ : -.');
    if (!(serial ? /^[A-Za-z0-9_-]{1,59}$/ : /^[A-Za-z0-9_]{1,64}$/).test(s))
      return err(out, serial ? 'Not a serial: at most 59 characters of A–Z a–z 0–9 _ -.' : 'Not a segment ID: a decimal number or an ID string of at most 64 characters.');
    var route = serial ? '/serial/decode/' : '/segment/reveal/';
    var note = el('p', 'note', 'asking leafd\'s ' + route + '…');
    out.appendChild(note);
    return toolApi(route + encodeURIComponent(name) + '/' + encodeURIComponent(s)).then(function (r) {
      note.remove();
      if (r.status !== 200 || !r.body || typeof r.body !== 'object') {
        return showError(out, 'GET ' + route.slice(0, -1), r, serial ? null : 'A leafd older than the /segment/reveal route answers 404, or 400 invalid_biz_tag (it reads the path as a tag).');
      }
      var b = r.body, title = serial
        ? 'Serial ' + b.serial + ' of code ' + b.code + (b.concealed ? ' (concealed): period ' + b.period + ', counter ' + b.counter : ': period ' + b.period + ', counter ' + b.counter)
        : 'Segment ID ' + b.id + ' of tag ' + (b.biz_tag || b.tag) + (b.concealed ? ' (concealed): block ' + b.block + ', counter ' + b.counter : ' (not concealed): the counter is the ID');
      showFields(out, title, b, 'parse-server');
    });
  }

  /* Generate: the node's own ID routes, count 1..100, ?enc= for segment and
   * snowflake; the answer is read as text, one ID a line (never a Number). */
  var ISSUE = {
    segment: { label: 'biz_tag', re: TAG_RE, enc: true, path: function (n) { return '/segment/' + encodeURIComponent(n); } },
    snowflake: { enc: true, path: function () { return '/snowflake'; } },
    serial: { label: 'Serial code', re: CODE_RE, path: function (n) { return '/serial/' + encodeURIComponent(n); } },
    uuid: { path: function () { return '/uuid'; } },
    ulid: { path: function () { return '/ulid'; } }
  };
  var tagsListed = false;
  function listTags() {
    if (tagsListed || modeOff('segment')) return;
    tagsListed = true;
    var fill = function () {
      var dl = $('issue-tags');
      clear(dl);
      (state.cache || []).slice(0, 500).forEach(function (t) { var o = el('option'); o.value = t.key; dl.appendChild(o); });
      if (!$('issue-name').value && state.cache && state.cache.length) $('issue-name').value = state.cache[0].key;
    };
    if (state.cache) fill(); else guard(api('/cache').then(function (r) { if (r.status === 200) { state.cache = r.body.tags; fill(); } }));
  }
  function issueKind() {
    if (modeOff('segment') && $('issue-kind').value === 'segment') $('issue-kind').value = modeOff('snowflake') ? 'uuid' : 'snowflake';
    var k = ISSUE[$('issue-kind').value];
    $('issue-name-wrap').hidden = !k.label;
    if (k.label) $('issue-name-label').textContent = k.label;
    $('issue-enc').disabled = !k.enc;
    $('issue-enc-wrap').classList.toggle('off', !k.enc);
    if ($('issue-kind').value === 'segment') listTags();
  }
  $('issue-kind').addEventListener('change', function () { $('issue-name').value = ''; issueKind(); });
  function parseThis(kind, name, enc, v) {
    /* A segment value goes to /segment/reveal (decimal or string): it
     * answers for plain tags too, saying concealed: false. */
    var pk = kind === 'serial' ? 'serial' : kind === 'segment' ? 'reveal' : 'auto';
    $('parse-kind').value = pk;
    parseKind();
    if (pk !== 'auto') $('parse-name').value = name;
    $('parse-input').value = v;
    $('parse-form').requestSubmit();
  }
  $('issue-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var out = $('issue-out'), kind = $('issue-kind').value, k = ISSUE[kind];
    var name = $('issue-name').value.trim(), cs = $('issue-count').value.trim(), enc = k.enc ? $('issue-enc').value : 'dec';
    clear(out);
    if (k.label && !k.re.test(name)) return err(out, k.label + ': ' + (kind === 'serial' ? '1 to 32 characters of A–Z a–z 0–9 _ -' : '1 to 128 characters of A–Z a–z 0–9 . _ : -'));
    if (!/^[0-9]{1,3}$/.test(cs) || Number(cs) < 1 || Number(cs) > 100) return err(out, 'Count: a whole number from 1 to 100.');
    var path = k.path(name) + '?count=' + Number(cs) + (enc !== 'dec' ? '&enc=' + enc : '');
    out.appendChild(el('p', 'note', 'GET ' + path + '…'));
    return toolApi(path).then(function (r) {
      clear(out);
      if (r.status !== 200 || typeof r.body !== 'string')
        return showError(out, 'GET ' + path, r, r.status === 404 && r.body && r.body.error === 'not_found'
          ? 'The admin listener serves no ID routes: open the console where the ID routes are served to generate IDs.' : null);
      var ids = r.body.split('\n').filter(function (x) { return x.length > 0; });
      out.appendChild(el('p', 'note', ids.length + ' issued by leafd (GET ' + path + '): real IDs, handed out once; they are gone from the sequence whether you use them or not.'));
      var ol = el('ol', 'issued');
      ol.id = 'issue-list';
      ids.forEach(function (v) {
        var li = el('li'), b = el('button', null, 'Parse');
        li.setAttribute('data-value', v);
        li.appendChild(el('span', 'out-id', v));
        b.type = 'button';
        b.addEventListener('click', function () { parseThis(kind, name, enc, v); $('parse-input').focus(); });
        li.appendChild(b);
        ol.appendChild(li);
      });
      out.appendChild(ol);
      if (kind === 'segment' && enc === 'dec' && ids.some(function (v, i) { return i > 0 && /^[0-9]+$/.test(v + ids[i - 1]) && BigInt(v) < BigInt(ids[i - 1]); }))
        out.appendChild(el('p', 'note', 'Not in increasing order: ' + name + ' is a concealed tag, whose batch is its counters permuted within the block (distinct, not sorted).'));
    });
  });
  function parseKind() {
    var k = $('parse-kind').value;
    $('parse-name-wrap').hidden = k === 'auto';
    $('parse-name-label').textContent = k === 'serial' ? 'Serial code' : 'biz_tag';
    $('parse-name').maxLength = k === 'serial' ? 32 : 128;
  }
  $('parse-kind').addEventListener('change', parseKind);
  parseKind();   /* a reload may keep the select's value */

  /* A time as ms since 1970 (BigInt): digits are ms, else ISO 8601 (UTC when no offset). */
  function parseTime(s) {
    s = s.trim();
    if (/^[0-9]{1,16}$/.test(s)) return BigInt(s);
    if (/^\d{4}-\d{2}-\d{2}$/.test(s)) s += 'T00:00:00Z';
    else if (/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(s)) s = s.replace(' ', 'T') + 'Z';
    var t = Date.parse(s);
    if (isNaN(t)) throw new Error('not a time: use ISO 8601 (2026-11-23T05:23:50.855Z) or ms since 1970');
    return BigInt(t);
  }
  function intField(id, max, what) {
    var s = $(id).value.trim();
    if (!/^[0-9]{1,12}$/.test(s)) throw new Error(what + ' must be a whole number from 0 to ' + max.toString());
    var v = BigInt(s);
    if (v > max) throw new Error(what + ' must be at most ' + max.toString() + ' with this layout');
    return v;
  }
  function pack(L, ms, dc, worker, seq) {
    var sb = BigInt(L.sequence_bits), wb = BigInt(L.worker_bits), db = BigInt(L.datacenter_bits);
    var ts = ms - BigInt(L.epoch_ms);
    if (ts < 0n) throw new Error('the time is before the layout\'s epoch (' + iso(L.epoch_ms) + ')');
    if (ts >= (1n << BigInt(L.timestamp_bits))) throw new Error('the time is past the end of the layout\'s timestamp');
    return (ts << (sb + wb + db)) | (dc << (sb + wb)) | (worker << sb) | seq;
  }
  function layoutMax(L) {
    return { dc: (1n << BigInt(L.datacenter_bits)) - 1n, worker: (1n << BigInt(L.worker_bits)) - 1n, seq: (1n << BigInt(L.sequence_bits)) - 1n };
  }
  $('gen-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var out = $('gen-out'), L = layout(), mx = layoutMax(L);
    clear(out);
    try {
      var ms = parseTime($('gen-time').value || String(Date.now()));
      var dc = L.datacenter_bits ? intField('gen-dc', mx.dc, 'datacenter') : 0n;
      var id = pack(L, ms, dc, intField('gen-worker', mx.worker, 'worker'), intField('gen-seq', mx.seq, 'sequence'));
      var box = el('div', 'preview');
      box.appendChild(el('div', 'label', 'Preview — not issued, not unique: never use as a key'));
      var idEl = el('div', 'id', id.toString()); idEl.id = 'gen-id'; box.appendChild(idEl);
      box.appendChild(el('div', 'note', 'time ' + iso(ms) + ' · computed in this page; leafd did not issue it, and any worker may issue the same number. Use GET /snowflake for real IDs.'));
      var b = el('button', null, 'Parse this preview'); b.type = 'button';
      b.addEventListener('click', function () { $('parse-input').value = id.toString(); $('parse-form').requestSubmit(); $('parse-input').focus(); });
      box.appendChild(b);
      out.appendChild(box);
    } catch (e) { err(out, e.message); }
  });
  $('gen-now').addEventListener('click', function () { $('gen-time').value = new Date().toISOString(); $('gen-form').requestSubmit(); });
  $('range-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var out = $('range-out'), L = layout(), mx = layoutMax(L);
    clear(out);
    try {
      var from = parseTime($('range-from').value || String(Date.now()));
      var to = $('range-to').value.trim() ? parseTime($('range-to').value) : from;
      if (to < from) throw new Error('"to" is before "from"');
      var lo = pack(L, from, 0n, 0n, 0n), hi = pack(L, to, mx.dc, mx.worker, mx.seq);
      var dl = el('dl');
      kv(dl, [['smallest', lo.toString(), 'out-id', 'min'], ['', iso(from) + ', any worker'], ['largest', hi.toString(), 'out-id', 'max'], ['', iso(to) + ' (whole millisecond), any worker']]);
      out.appendChild(dl);
      out.appendChild(el('p', 'sql mono', 'WHERE id BETWEEN ' + lo.toString() + ' AND ' + hi.toString()));
    } catch (e) { err(out, e.message); }
  });

  /* ---- tabs and the refresh loop ---- */

  var tabs = ['overview', 'segments', 'db', 'snowflake', 'tool'];
  function showTab(name) {
    if (tabs.indexOf(name) < 0) name = 'overview';
    state.tab = name;
    tabs.forEach(function (t) { $(t).hidden = t !== name; });
    var links = document.querySelectorAll('nav a');
    for (var i = 0; i < links.length; i++) {
      if (links[i].getAttribute('data-tab') === name) links[i].setAttribute('aria-current', 'page'); else links[i].removeAttribute('aria-current');
    }
    if (name === 'segments') { loadCache(); }
    if (name === 'db' && !state.db) loadDb();
    if (name === 'snowflake') loadSfState().then(drawSnowflake);
    if (name === 'overview') drawOverviewCharts();
    if (name === 'segments' && segTable) segTable.paint();
    if (name === 'db' && dbTable) dbTable.paint();
    if (name === 'tool') issueKind();
  }
  window.addEventListener('hashchange', function () { showTab(location.hash.slice(1)); });

  function refreshAll() {
    sample();
    loadOverview().then(function () {
      if (state.tab === 'snowflake') drawSnowflake();
      if (state.tab === 'tool') drawLayout();
    });
    if (state.tab === 'segments') loadCache();
    if (state.tab === 'db') loadDb();
  }

  var lastCache = 0;
  function tick() {
    if (document.hidden || state.denied) return;
    var last = state.samples[state.samples.length - 1];
    if (!last || Date.now() - last.t >= (state.sampleEvery || SAMPLE_MS) - 200) sample();
    loadOverview().then(function () { if (state.tab === 'snowflake') drawSnowflake(); });
    if (state.tab === 'segments' && Date.now() - lastCache >= CACHE_MS - 100) { lastCache = Date.now(); loadCache(); }
  }

  $('gen-time').value = new Date().toISOString();
  $('range-from').value = new Date(Date.now() - 3600000).toISOString();
  $('range-to').value = new Date().toISOString();
  $('foot').textContent = 'leafd console · data from /health /metrics /cache /db /snowflake/state · refreshes every ' + SAMPLE_MS / 1000 + ' s';
  /* /health first (it is never behind the token): it says which modes are on. */
  guard(api('/health').then(function (r) { state.health = r.body; })).then(function () {
    showTab(location.hash.slice(1) || 'overview');
    refreshAll();
    setInterval(tick, SAMPLE_MS);
  });
  window.addEventListener('resize', function () { if (state.tab === 'overview') drawOverviewCharts(); });
}());
