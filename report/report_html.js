// report_html.js: the script of ppcc --report-html (embedded in the page).
// The layout is in the SVG already (computed by ppcc); this only searches,
// folds module groups (a folded group's band of layers shrinks to one and
// everything below moves up), zooms, and jumps to nodes.
(function () {
  'use strict';
  var svg = document.getElementById('graph');
  var LH = +svg.dataset.lh, TOP = +svg.dataset.top, NH = +svg.dataset.nh;
  var W0 = +svg.getAttribute('width'), H0 = +svg.getAttribute('height');
  var modules = JSON.parse(document.getElementById('modules').textContent);
  var nodes = Array.prototype.slice.call(svg.querySelectorAll('#nodes > g'));
  var groups = Array.prototype.slice.call(svg.querySelectorAll('#groups > g'));
  var edges = Array.prototype.slice.call(svg.querySelectorAll('#edges > polyline'));
  var labels = Array.prototype.slice.call(svg.querySelectorAll('#cutlabels > text'));
  var nLayers = Math.round((H0 - TOP - 20) / LH);
  var byId = {};
  // remember the drawn geometry: items as (x, layer), points as (x, layer, offset)
  nodes.forEach(function (n) {
    var t = /translate\(([-\d.]+),([-\d.]+)\)/.exec(n.getAttribute('transform'));
    n._x = +t[1]; n._l = +n.dataset.l;
    n._m = n.dataset.m ? n.dataset.m.split(' ').map(Number) : [];
    n._name = n.querySelector('title').textContent.split('\n')[0];
    byId[n.id] = n;
  });
  edges.forEach(function (e) {
    e._pts = e.getAttribute('points').split(' ').map(function (p) {
      var xy = p.split(','), y = +xy[1], l = Math.floor((y - TOP + 0.01) / LH);
      return [+xy[0], l, y - TOP - l * LH];
    });
    e._s = byId['n' + e.dataset.s]; e._t = byId['n' + e.dataset.t];
  });
  groups.forEach(function (g) {
    var r = g.querySelector('rect');
    g._l0 = +g.dataset.l0; g._l1 = +g.dataset.l1; g._p = +g.dataset.p;
    g._y = +r.getAttribute('y') - TOP - g._l0 * LH; g._h = +r.getAttribute('height') - (g._l1 - g._l0) * LH;
    g._ty = +g.querySelector('text').getAttribute('y') - +r.getAttribute('y');
    g._cx = +r.getAttribute('x') + +r.getAttribute('width') / 2;
    g._i = +g.id.slice(1);
  });
  labels.forEach(function (t) {
    t._l = +t.dataset.l; t._y = +t.getAttribute('y') - TOP - t._l * LH; t._s = byId['n' + t.dataset.s];
  });
  var gById = {};
  groups.forEach(function (g) { gById[g._i] = g; });

  var folded = {}; // group index -> true
  function inFolded(g) { // a folded group, or one inside a folded one
    for (var p = g._p; p >= 0; p = gById[p] ? gById[p]._p : -1) if (folded[p]) return true;
    return false;
  }
  function relayout() {
    // layer map: a folded band [l0, l1] becomes the single layer l0
    var map = new Array(nLayers + 1), start = new Array(nLayers + 1);
    var active = groups.filter(function (g) { return folded[g._i] && !inFolded(g); });
    for (var l = 0; l <= nLayers; l++) start[l] = -1;
    active.forEach(function (g) { for (var l = g._l0 + 1; l <= g._l1; l++) start[l] = g._l0; });
    for (var l2 = 0, k = 0; l2 <= nLayers; l2++) map[l2] = start[l2] >= 0 ? map[start[l2]] : k++;
    var y = function (l, off) { return TOP + map[l] * LH + off; };
    var hiddenBy = function (n) { // the outermost folded group holding node n, or -1
      for (var i = 0; i < n._m.length; i++) if (folded[n._m[i]] && gById[n._m[i]]) return n._m[i];
      return -1;
    };
    nodes.forEach(function (n) {
      n._h = hiddenBy(n);
      n.classList.toggle('hidden', n._h >= 0);
      n.setAttribute('transform', 'translate(' + n._x + ',' + y(n._l, 0) + ')');
    });
    edges.forEach(function (e) {
      var hs = e._s._h, ht = e._t._h, pts = e._pts;
      e.classList.toggle('hidden', hs >= 0 && hs === ht);
      if (hs >= 0 || ht >= 0) { // an end inside a folded group: a straight line from or to its box
        var a = pts[0], b = pts[pts.length - 1];
        pts = [hs >= 0 ? [gById[hs]._cx, gById[hs]._l0, NH] : a, ht >= 0 ? [gById[ht]._cx, gById[ht]._l0, 0] : b];
      }
      e.setAttribute('points', pts.map(function (p) { return p[0] + ',' + y(p[1], p[2]); }).join(' '));
    });
    labels.forEach(function (t) {
      t.classList.toggle('hidden', !!t._s && t._s._h >= 0);
      t.setAttribute('y', y(t._l, t._y));
    });
    groups.forEach(function (g) {
      var hide = inFolded(g), f = !!folded[g._i];
      g.classList.toggle('hidden', hide);
      g.classList.toggle('folded', f);
      var r = g.querySelector('rect'), t = g.querySelector('text');
      var top = f ? y(g._l0, 0) : y(g._l0, 0) + g._y, h = f ? NH : (map[g._l1] - map[g._l0]) * LH + g._h;
      r.setAttribute('y', top); r.setAttribute('height', h);
      // folded: the colour of its (first) stage, as the legend has it; a red edge when a cut runs inside
      r.setAttribute('class', f ? g.dataset.st : '');
      var sw = f && document.querySelector('.legend .sw.' + g.dataset.st.split(' ')[0]);
      r.style.fill = sw ? getComputedStyle(sw).backgroundColor : '';
      t.setAttribute('y', f ? top + NH / 2 + 4 : top + g._ty);
      if (g.classList.contains('fold')) t.firstChild.nodeValue = t.firstChild.nodeValue.replace(/^[\u25be\u25b8]/, f ? '\u25b8' : '\u25be');
    });
    var total = 0;
    for (var l3 = 0; l3 < nLayers; l3++) total = Math.max(total, map[l3] + 1);
    H = TOP + total * LH + 20;
    zoom(z);
  }
  groups.forEach(function (g) {
    if (!g.classList.contains('fold')) return;
    g.querySelector('text').addEventListener('click', function () {
      if (folded[g._i]) delete folded[g._i]; else folded[g._i] = true;
      relayout();
    });
  });
  // "collapse": from the outermost groups down, through any group that is
  // alone at its level (a model's one "encoder"), fold the first foldable
  // ones met (ResNet's layer1..layer4, a transformer's blocks)
  var kids = {};
  groups.forEach(function (g) { (kids[g._p] = kids[g._p] || []).push(g); });
  function foldLevel(list) {
    if (list.length === 1 && kids[list[0]._i]) return foldLevel(kids[list[0]._i]);
    list.forEach(function (g) {
      if (g.classList.contains('fold')) folded[g._i] = true;
      else if (kids[g._i]) foldLevel(kids[g._i]);
    });
  }
  document.getElementById('fold-all').onclick = function () {
    folded = {};
    if (kids[-1]) foldLevel(kids[-1]);
    relayout();
  };
  document.getElementById('unfold-all').onclick = function () { folded = {}; relayout(); };

  // zoom: the SVG's drawn size against its viewBox
  var z = 1, H = H0;
  function zoom(nz) {
    z = Math.max(0.1, Math.min(3, nz));
    svg.setAttribute('viewBox', '0 0 ' + W0 + ' ' + H);
    svg.setAttribute('width', Math.round(W0 * z));
    svg.setAttribute('height', Math.round(H * z));
  }
  document.getElementById('zoom-in').onclick = function () { zoom(z * 1.25); };
  document.getElementById('zoom-out').onclick = function () { zoom(z / 1.25); };

  // jumping to a node: unfold what hides it, scroll it into the middle, mark it
  var view = document.getElementById('view'), selected = null;
  function show(n) {
    var changed = false;
    n._m.forEach(function (i) { if (folded[i]) { delete folded[i]; changed = true; } });
    if (changed) relayout();
    var t = /translate\(([-\d.]+),([-\d.]+)\)/.exec(n.getAttribute('transform'));
    view.scrollTo({ left: Math.max(0, +t[1] * z - view.clientWidth / 2 + 75 * z),
                    top: Math.max(0, +t[2] * z - view.clientHeight / 2) });
    if (selected) selected.classList.remove('sel');
    selected = n; n.classList.add('sel');
  }
  document.addEventListener('click', function (ev) {
    var a = ev.target.closest && ev.target.closest('a.goto');
    if (!a) return;
    var n = byId[a.getAttribute('href').slice(1)];
    if (n) { ev.preventDefault(); show(n); }
  });
  window.ppShow = function (id) { if (byId[id]) show(byId[id]); };

  // search: node names and module paths; Enter walks through the hits
  var input = document.getElementById('search'), hitsEl = document.getElementById('hits');
  var hits = [], at = -1;
  function search() {
    var q = input.value.trim().toLowerCase();
    hits = []; at = -1;
    var gm = {};
    groups.forEach(function (g) {
      var m = q && modules[g._i].toLowerCase().indexOf(q) >= 0;
      g.classList.toggle('hit', !!m);
      if (m) gm[g._i] = true;
    });
    nodes.forEach(function (n) {
      var m = !!q && (n._name.toLowerCase().indexOf(q) >= 0 || n._m.some(function (i) { return gm[i]; }));
      n.classList.toggle('hit', m);
      if (m) hits.push(n);
    });
    hitsEl.textContent = q ? hits.length + ' match' + (hits.length === 1 ? '' : 'es') : '';
  }
  input.addEventListener('input', search);
  input.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter' || !hits.length) return;
    at = (at + (ev.shiftKey ? hits.length - 1 : 1)) % hits.length;
    show(hits[at]);
    hitsEl.textContent = (at + 1) + ' of ' + hits.length;
  });
  document.body.dataset.ready = '1';
})();
