// SPDX-License-Identifier: Apache-2.0
//
// podprof's /debug/pprof/ui/ page: fetches a profile from the same server,
// decodes it with pprof-format and shows it as a d3-flame-graph flame graph
// and a top table (the columns of `go tool pprof -top`), or the difference
// of two snapshots. Every choice lives in the query string so a view can be
// bookmarked; the bearer token (when the server wants one) comes from the
// URL fragment (#token=...) or a prompt and is kept in sessionStorage only.
import { Profile } from 'pprof-format';
import flamegraph from 'd3-flame-graph';
import { select } from 'd3-selection';
import './style.css';

const PROFILES = ['profile', 'heap', 'allocs', 'block', 'mutex', 'goroutine', 'threadcreate'];
const VIEWS = ['flame', 'top', 'diff'];
const TOKEN_KEY = 'podprof-token';
const TOP_ROWS = 500;
const MAX_SECONDS = 3600;

const $ = (id) => document.getElementById(id);

// ---- URL state -----------------------------------------------------------

function readState() {
	const q = new URLSearchParams(location.search);
	const st = {
		profile: q.get('profile') || 'profile',
		seconds: parseInt(q.get('seconds') || '10', 10),
		si: q.get('si') || '',
		pid: q.get('pid') || '',
		view: q.get('view') || 'flame',
		sort: q.get('sort') === 'cum' ? 'cum' : 'flat',
		search: q.get('search') || '',
	};
	if (!PROFILES.includes(st.profile))
		st.profile = 'profile';
	if (!VIEWS.includes(st.view))
		st.view = 'flame';
	if (!(st.seconds >= 1 && st.seconds <= MAX_SECONDS))
		st.seconds = 10;
	return st;
}

function writeState(st, push) {
	const q = new URLSearchParams();
	q.set('profile', st.profile);
	if (st.profile === 'profile' || st.view === 'diff')
		q.set('seconds', String(st.seconds));
	if (st.si)
		q.set('si', st.si);
	if (st.pid)
		q.set('pid', st.pid);
	q.set('view', st.view);
	if (st.view !== 'flame')
		q.set('sort', st.sort);
	if (st.search && st.view !== 'top')
		q.set('search', st.search);
	const url = location.pathname + '?' + q.toString();
	if (url !== location.pathname + location.search)
		(push ? history.pushState : history.replaceState).call(history, null, '', url);
}

// ---- token ---------------------------------------------------------------

function takeTokenFromFragment() {
	const h = new URLSearchParams(location.hash.replace(/^#/, ''));
	const t = h.get('token');
	if (t !== null) {
		sessionStorage.setItem(TOKEN_KEY, t);
		// Drop it from the address bar so a copied link does not carry it.
		history.replaceState(null, '', location.pathname + location.search);
	}
}

async function authFetch(url) {
	for (let attempt = 0; attempt < 3; attempt++) {
		const token = sessionStorage.getItem(TOKEN_KEY);
		const headers = token ? { Authorization: 'Bearer ' + token } : {};
		const r = await fetch(url, { headers, cache: 'no-store', credentials: 'omit' });
		if (r.status !== 401)
			return r;
		const t = window.prompt('podprof wants a bearer token (http.token_file) for ' + url);
		if (t === null || t === '')
			return r;
		sessionStorage.setItem(TOKEN_KEY, t.trim());
	}
	throw new Error('401 Unauthorized: wrong token');
}

// ---- decoding ------------------------------------------------------------

async function gunzip(bytes) {
	if (bytes.length < 2 || bytes[0] !== 0x1f || bytes[1] !== 0x8b)
		return bytes;
	const ds = new DecompressionStream('gzip');
	const out = new Response(new Blob([bytes]).stream().pipeThrough(ds));
	return new Uint8Array(await out.arrayBuffer());
}

const num = (v) => (typeof v === 'bigint' ? Number(v) : Number(v || 0));

// A profile reduced to what the page shows: sample types and, per sample,
// its function names leaf first (inlined frames expanded, as pprof does),
// values and process.
function reduce(p) {
	const S = p.stringTable.strings;
	const str = (i) => S[num(i)] || '';
	const funcs = new Map();
	for (const f of p.function)
		funcs.set(num(f.id), str(f.name));
	const locs = new Map();
	for (const l of p.location) {
		const names = [];
		for (const line of l.line)
			names.push(funcs.get(num(line.functionId)) || '?');
		if (!names.length)
			names.push('0x' + num(l.address).toString(16));
		locs.set(num(l.id), names);
	}
	const types = p.sampleType.map((vt) => ({ type: str(vt.type), unit: str(vt.unit) }));
	let def = types.length - 1;
	const dst = str(p.defaultSampleType);
	if (dst) {
		const i = types.findIndex((t) => t.type === dst);
		if (i >= 0)
			def = i;
	}
	const procs = new Map();
	const samples = p.sample.map((s) => {
		const stack = [];
		for (const id of s.locationId)
			for (const n of locs.get(num(id)) || ['?'])
				stack.push(n);
		let pid = '';
		let comm = '';
		for (const lb of s.label) {
			const k = str(lb.key);
			if (k === 'pid')
				pid = lb.str ? str(lb.str) : String(num(lb.num));
			else if (k === 'comm')
				comm = str(lb.str);
		}
		if (pid && !procs.has(pid))
			procs.set(pid, comm);
		return { stack, values: s.value.map(num), pid };
	});
	return { types, def, samples, procs, durationNanos: num(p.durationNanos) };
}

// ---- formatting as go tool pprof ------------------------------------------

const UNITS = {
	memory: { base: 'B', aliases: { b: 1, byte: 1, bytes: 1, kb: 1024, mb: 1 << 20, gb: 1 << 30 },
		  steps: [['B', 1], ['kB', 1024], ['MB', 1024 ** 2], ['GB', 1024 ** 3], ['TB', 1024 ** 4], ['PB', 1024 ** 5]] },
	time: { base: 'ns', aliases: { ns: 1, nanosecond: 1, nanoseconds: 1, us: 1e3, microsecond: 1e3, microseconds: 1e3,
			 ms: 1e6, millisecond: 1e6, milliseconds: 1e6, s: 1e9, sec: 1e9, second: 1e9, seconds: 1e9 },
		steps: [['ns', 1], ['us', 1e3], ['ms', 1e6], ['s', 1e9], ['hrs', 3600e9], ['days', 86400e9], ['wks', 7 * 86400e9], ['yrs', 365.25 * 86400e9]] },
};

function scaled(v, unit) {
	const u = (unit || '').toLowerCase();
	let sv, suffix = '';
	let found = false;
	for (const ut of Object.values(UNITS)) {
		if (!(u in ut.aliases))
			continue;
		const base = Math.abs(v) * ut.aliases[u];
		let step = ut.steps[0];
		for (const s of ut.steps)
			if (base >= s[1])
				step = s;
		sv = base / step[1];
		suffix = step[0];
		found = true;
		break;
	}
	if (!found)
		sv = Math.abs(v);
	let t = sv.toFixed(2).replace(/\.00$/, '');
	if (t === '0')
		return '0';
	return (v < 0 ? '-' : '') + t + suffix;
}

const pct = (v, total) => (total ? ((100 * v) / total).toFixed(2) : '0.00') + '%';

// ---- aggregation ---------------------------------------------------------

function selectSamples(m, si, pid) {
	return m.samples.filter((s) => !pid || s.pid === pid).map((s) => ({ stack: s.stack, v: s.values[si] }));
}

// Per function: flat (it is the leaf) and cum (it is on the stack, once per sample).
function topTable(samples) {
	const rows = new Map();
	let total = 0;
	const row = (n) => {
		let r = rows.get(n);
		if (!r) {
			r = { name: n, flat: 0, cum: 0 };
			rows.set(n, r);
		}
		return r;
	};
	for (const s of samples) {
		total += Math.abs(s.v);
		if (!s.stack.length)
			continue;
		row(s.stack[0]).flat += s.v;
		for (const n of new Set(s.stack))
			row(n).cum += s.v;
	}
	return { rows, total };
}

// Flame graph tree, root first; value = cumulative, delta = own difference.
function flameTree(samples, base) {
	const root = { name: 'all', value: 0, delta: 0, children: [], idx: new Map() };
	const add = (s, sign) => {
		let n = root;
		if (sign > 0)
			root.value += s.v;
		for (let i = s.stack.length - 1; i >= 0; i--) {
			const name = s.stack[i];
			let c = n.idx.get(name);
			if (!c) {
				c = { name, value: 0, delta: 0, children: [], idx: new Map() };
				n.idx.set(name, c);
				n.children.push(c);
			}
			if (sign > 0)
				c.value += s.v;
			n = c;
		}
		n.delta += sign * s.v;
	};
	for (const s of samples)
		add(s, 1);
	if (base)
		for (const s of base)
			add(s, -1);
	const strip = (n) => {
		delete n.idx;
		if (!base)
			n.children = n.children.filter((c) => c.value > 0);
		n.children.forEach(strip);
	};
	strip(root);
	return root;
}

// ---- page ----------------------------------------------------------------

let state = readState();
let current = null; // { model, raw, base?, baseRaw?, url }
let chart = null;
let takeNow = null;

function setStatus(s, text) {
	const el = $('status');
	el.dataset.state = s;
	el.textContent = text;
}

function showControls() {
	$('profile').value = state.profile;
	$('seconds').value = String(state.seconds);
	$('seconds-label').hidden = !(state.profile === 'profile' || state.view === 'diff');
	$('seconds-label').firstChild.textContent =
		state.view === 'diff' && state.profile !== 'profile' ? 'seconds between snapshots ' : 'seconds ';
	for (const b of document.querySelectorAll('button.view'))
		b.setAttribute('aria-pressed', String(b.dataset.view === state.view));
	for (const b of document.querySelectorAll('button.sort'))
		b.setAttribute('aria-pressed', String(b.dataset.sort === state.sort));
	$('search').value = state.search;
	$('flame-pane').hidden = state.view === 'top';
	$('top-pane').hidden = false;
}

function fillSelectors(m) {
	const si = $('si');
	si.replaceChildren();
	m.types.forEach((t, i) => si.add(new Option(t.type + ' (' + t.unit + ')', t.type, false, false)));
	let i = m.types.findIndex((t) => t.type === state.si);
	if (i < 0)
		i = m.def;
	si.selectedIndex = i;
	const pid = $('pid');
	pid.replaceChildren(new Option('all processes (' + m.procs.size + ')', ''));
	const procs = [...m.procs.entries()].sort((a, b) => Number(a[0]) - Number(b[0]));
	for (const [p, comm] of procs)
		pid.add(new Option(p + ' ' + comm, p));
	if (state.pid && !m.procs.has(state.pid))
		pid.add(new Option(state.pid + ' (no samples)', state.pid));
	pid.value = state.pid;
	return i;
}

function profileUrl() {
	let u = '../' + encodeURIComponent(state.profile);
	if (state.profile === 'profile')
		u += '?seconds=' + state.seconds;
	return u;
}

async function fetchProfile(url) {
	const r = await authFetch(url);
	const body = new Uint8Array(await r.arrayBuffer());
	if (!r.ok)
		throw new Error(r.status + ' ' + r.statusText + ': ' + new TextDecoder().decode(body.slice(0, 300)).trim());
	const model = reduce(Profile.decode(await gunzip(body)));
	return { raw: body, model };
}

function downloadLink(el, raw, name) {
	if (el.href && el.href.startsWith('blob:'))
		URL.revokeObjectURL(el.href);
	if (!raw) {
		el.hidden = true;
		el.removeAttribute('href');
		return;
	}
	el.href = URL.createObjectURL(new Blob([raw], { type: 'application/octet-stream' }));
	el.download = name;
	el.hidden = false;
}

function stamp() {
	return new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '');
}

let loadSeq = 0;

// ---- the flame graph's state, for people and for tests -------------------
//
// d3-flame-graph moves frames with d3 transitions (new frames get their
// width after a delay, a zoom or search animates every frame) that run on
// animation frames: on a loaded machine they take as long as they take. So
// the page says what the graph shows in #flame's data attributes, set here
// and nowhere else:
//   data-state   "none"    no graph for the data on screen (loading, error,
//                          top view)
//                "drawing" frames still moving (transitions scheduled or
//                          running on some element of the graph)
//                "ready"   every frame at its final place, width and label
//   data-seq     counts the changes (render, search, zoom, reset): a
//                waiter reads it before acting and waits for a larger one,
//                so it never takes the state from before its action
//   data-zoom    the frame zoomed into ("" for the whole graph)
//   data-search  the search term applied ("" for none)
//   data-width   the graph's width in pixels (the root frame's width)
let flameSeq = 0;

// d3-transition keeps an element's scheduled and running transitions in
// node.__transition and deletes it after the last one ended, having set the
// final values: an element without it is done moving.
function flameMoving(el) {
	for (const n of el.querySelectorAll('*'))
		if (n.__transition)
			return true;
	return false;
}

function flameState(s, { zoom, search, width } = {}) {
	const el = $('flame');
	const seq = ++flameSeq;
	el.dataset.seq = String(seq);
	if (zoom !== undefined)
		el.dataset.zoom = zoom;
	if (search !== undefined)
		el.dataset.search = search;
	if (width !== undefined)
		el.dataset.width = String(width);
	el.dataset.state = s;
	if (s !== 'drawing')
		return;
	const settle = () => {
		if (seq !== flameSeq)
			return; // a later change watches now
		if (flameMoving(el))
			requestAnimationFrame(settle);
		else
			el.dataset.state = 'ready';
	};
	requestAnimationFrame(settle);
}

async function load() {
	const seq = ++loadSeq;
	const url = profileUrl();
	current = null;
	flameState('none');
	downloadLink($('download'), null);
	downloadLink($('download-base'), null);
	$('total').textContent = '';
	$('total').dataset.value = '';
	try {
		if (state.view === 'diff') {
			setStatus('loading', state.profile === 'profile' ?
				  'recording the first CPU window of ' + state.seconds + ' s' : 'taking the first snapshot');
			const a = await fetchProfile(url);
			if (seq !== loadSeq)
				return;
			if (state.profile === 'profile') {
				setStatus('loading', 'recording the second CPU window of ' + state.seconds + ' s');
			} else {
				await countdown(seq, state.seconds);
				if (seq !== loadSeq)
					return;
				setStatus('loading', 'taking the second snapshot');
			}
			const b = await fetchProfile(url);
			if (seq !== loadSeq)
				return;
			current = { model: b.model, raw: b.raw, base: a.model, baseRaw: a.raw };
		} else {
			setStatus('loading', state.profile === 'profile' ?
				  'recording a CPU window of ' + state.seconds + ' s' : 'fetching ' + state.profile);
			const p = await fetchProfile(url);
			if (seq !== loadSeq)
				return;
			current = { model: p.model, raw: p.raw };
		}
	} catch (e) {
		if (seq === loadSeq)
			setStatus('error', String(e.message || e));
		return;
	}
	const t = stamp();
	downloadLink($('download'), current.raw, state.profile + '-' + t + '.pb.gz');
	if (current.baseRaw)
		downloadLink($('download-base'), current.baseRaw, state.profile + '-base-' + t + '.pb.gz');
	render();
}

function countdown(seq, secs) {
	return new Promise((resolve) => {
		let left = secs;
		const btn = $('take-now');
		const done = () => {
			clearInterval(timer);
			btn.hidden = true;
			takeNow = null;
			resolve();
		};
		const tick = () => {
			if (seq !== loadSeq || left <= 0)
				return done();
			setStatus('loading', 'first snapshot taken; the second in ' + left + ' s');
			left--;
		};
		const timer = setInterval(tick, 1000);
		takeNow = done;
		btn.hidden = false;
		tick();
	});
}

function render() {
	if (!current)
		return;
	const m = current.model;
	const si = fillSelectors(m);
	const type = m.types[si];
	state.si = type ? type.type : '';
	writeState(state, false);
	if (!type) {
		setStatus('error', 'the profile has no sample types');
		return;
	}
	let bi = -1;
	if (current.base)
		bi = current.base.types.findIndex((t) => t.type === type.type);
	const samples = selectSamples(m, si, state.pid);
	const base = current.base && bi >= 0 ? selectSamples(current.base, bi, state.pid) : null;
	const top = topTable(samples);
	const unit = type.unit;
	const tot = $('total');
	tot.dataset.value = String(top.total);
	tot.dataset.unit = unit;
	let text = 'total ' + scaled(top.total, unit) + ' ' + type.type;
	if (base) {
		const bt = topTable(base);
		tot.dataset.base = String(bt.total);
		text = 'before ' + scaled(bt.total, unit) + ', after ' + scaled(top.total, unit) +
		       ' (' + (top.total >= bt.total ? '+' : '') + scaled(top.total - bt.total, unit) + ') ' + type.type;
		renderDiffTable(top, bt, unit);
	} else {
		renderTopTable(top, unit);
	}
	tot.textContent = text;
	if (state.view !== 'top')
		renderFlame(flameTree(samples, base), unit, !!base);
	else
		flameState('none');
	setStatus('ready', samples.length + ' stacks' + (m.durationNanos ? ', ' + scaled(m.durationNanos, 'ns') + ' window' : ''));
}

function renderFlame(tree, unit, diff) {
	const el = $('flame');
	if (chart)
		chart.destroy();
	el.replaceChildren();
	const width = Math.max(400, el.clientWidth || document.body.clientWidth - 32);
	chart = flamegraph()
		.width(width)
		.cellHeight(18)
		.transitionDuration(300)
		.minFrameSize(1)
		.sort(true)
		.computeDelta(diff)
		.setDetailsElement($('details'))
		// After a click's zoom (and resetZoom) has scheduled its transitions.
		.onClick((d) => flameState('drawing', { zoom: d.parent ? d.data.name : '' }))
		.label((d) => d.data.name + ': ' + scaled(d.value, unit) +
		       (diff ? ' (' + (d.delta >= 0 ? '+' : '') + scaled(d.delta || 0, unit) + ')' : '') +
		       ', ' + pct(d.value, tree.value));
	if (diff) {
		// Red for growth, blue for shrinkage, stronger the larger the change
		// relative to the largest change in the graph.
		let max = 0;
		const walk = (n) => {
			const cum = n.children.reduce((acc, c) => acc + walk(c), n.delta);
			max = Math.max(max, Math.abs(cum));
			return cum;
		};
		walk(tree);
		chart.setColorMapper((d, orig) => {
			if (d.highlight)
				return orig;
			const delta = d.delta || 0;
			const k = max ? Math.min(1, Math.abs(delta) / max) : 0;
			const fade = Math.round(225 * (1 - k));
			if (delta > 0)
				return 'rgb(240,' + fade + ',' + fade + ')';
			if (delta < 0)
				return 'rgb(' + fade + ',' + fade + ',240)';
			return 'rgb(225,225,225)';
		});
	}
	select(el).datum(tree).call(chart);
	if (state.search)
		chart.search(state.search);
	flameState('drawing', { zoom: '', search: state.search, width });
}

function headerRow(cols) {
	const tr = document.createElement('tr');
	for (const c of cols) {
		const th = document.createElement('th');
		th.textContent = c;
		if (c === 'name')
			th.className = 'name';
		tr.append(th);
	}
	return tr;
}

function cell(tr, text, cls) {
	const td = document.createElement('td');
	td.textContent = text;
	if (cls)
		td.className = cls;
	tr.append(td);
	return td;
}

function renderTopTable(top, unit) {
	// Functions with nothing in this sample type are left out, as go tool pprof does.
	const rows = [...top.rows.values()].filter((r) => r.flat || r.cum);
	const key = state.sort;
	rows.sort((a, b) => b[key] - a[key] || b.cum - a.cum || (a.name < b.name ? -1 : 1));
	$('top').tHead.replaceChildren(headerRow(['flat', 'flat%', 'sum%', 'cum', 'cum%', 'name']));
	const body = document.createDocumentFragment();
	let sum = 0;
	for (const r of rows.slice(0, TOP_ROWS)) {
		sum += r.flat;
		const tr = document.createElement('tr');
		tr.dataset.name = r.name;
		tr.dataset.flat = String(r.flat);
		tr.dataset.cum = String(r.cum);
		cell(tr, scaled(r.flat, unit));
		cell(tr, pct(r.flat, top.total));
		cell(tr, pct(sum, top.total));
		cell(tr, scaled(r.cum, unit));
		cell(tr, pct(r.cum, top.total));
		cell(tr, r.name, 'name');
		body.append(tr);
	}
	$('top').tBodies[0].replaceChildren(body);
	$('top-note').textContent = rows.length > TOP_ROWS ? rows.length + ' functions, the first ' + TOP_ROWS + ' shown' :
								 rows.length + ' functions';
}

function renderDiffTable(after, before, unit) {
	const names = new Set([...after.rows.keys(), ...before.rows.keys()]);
	const zero = { flat: 0, cum: 0 };
	const rows = [...names].filter((n) => {
		const a = after.rows.get(n);
		const b = before.rows.get(n);
		return (a && (a.flat || a.cum)) || (b && (b.flat || b.cum));
	}).map((n) => {
		const a = after.rows.get(n) || zero;
		const b = before.rows.get(n) || zero;
		return { name: n, flat: a.flat - b.flat, cum: a.cum - b.cum, before: b, after: a };
	});
	const key = state.sort;
	// What grew most first, what shrank most last.
	rows.sort((x, y) => y[key] - x[key] || (x.name < y.name ? -1 : 1));
	$('top').tHead.replaceChildren(headerRow(['flat Δ', 'cum Δ', 'flat before', 'flat after', 'cum before', 'cum after', 'name']));
	const body = document.createDocumentFragment();
	const shown = rows.length > TOP_ROWS ? rows.slice(0, TOP_ROWS / 2).concat(rows.slice(-TOP_ROWS / 2)) : rows;
	for (const r of shown) {
		const tr = document.createElement('tr');
		tr.dataset.name = r.name;
		tr.dataset.flat = String(r.flat);
		tr.dataset.cum = String(r.cum);
		const sign = (v) => (v > 0 ? '+' : '') + scaled(v, unit);
		const cls = (v) => (v > 0 ? 'grew' : v < 0 ? 'shrank' : '');
		cell(tr, sign(r.flat), cls(r.flat));
		cell(tr, sign(r.cum), cls(r.cum));
		cell(tr, scaled(r.before.flat, unit));
		cell(tr, scaled(r.after.flat, unit));
		cell(tr, scaled(r.before.cum, unit));
		cell(tr, scaled(r.after.cum, unit));
		cell(tr, r.name, 'name');
		body.append(tr);
	}
	$('top').tBodies[0].replaceChildren(body);
	$('top-note').textContent = 'difference of two snapshots; ' + rows.length + ' functions';
}

// ---- events --------------------------------------------------------------

function change(fn, { reload = false, push = true } = {}) {
	fn();
	writeState(state, push);
	showControls();
	if (reload || !current)
		load();
	else
		render();
}

function init() {
	takeTokenFromFragment();
	$('controls').addEventListener('submit', (e) => {
		e.preventDefault();
		change(() => {}, { reload: true, push: false });
	});
	$('profile').addEventListener('change', (e) => change(() => {
		state.profile = e.target.value;
		state.si = '';
	}, { reload: true }));
	$('seconds').addEventListener('change', (e) => {
		const v = parseInt(e.target.value, 10);
		if (v >= 1 && v <= MAX_SECONDS)
			change(() => { state.seconds = v; }, { reload: state.profile === 'profile' || state.view === 'diff' });
	});
	$('si').addEventListener('change', (e) => change(() => { state.si = e.target.value; }));
	$('pid').addEventListener('change', (e) => change(() => { state.pid = e.target.value; }));
	for (const b of document.querySelectorAll('button.view'))
		b.addEventListener('click', () => {
			const v = b.dataset.view;
			const was = state.view;
			// Entering or leaving the diff view needs other data.
			change(() => { state.view = v; }, { reload: (v === 'diff') !== (was === 'diff') });
		});
	for (const b of document.querySelectorAll('button.sort'))
		b.addEventListener('click', () => change(() => { state.sort = b.dataset.sort; }));
	$('search').addEventListener('change', (e) => {
		state.search = e.target.value;
		writeState(state, false);
		if (chart) {
			chart.clear();
			if (state.search)
				chart.search(state.search);
			flameState('drawing', { search: state.search });
		}
	});
	$('reset').addEventListener('click', () => {
		state.search = '';
		$('search').value = '';
		writeState(state, false);
		if (chart) {
			chart.resetZoom();
			chart.clear();
			flameState('drawing', { zoom: '', search: '' });
		}
	});
	$('take-now').addEventListener('click', () => takeNow && takeNow());
	window.addEventListener('popstate', () => {
		const prev = state;
		state = readState();
		showControls();
		if (prev.profile !== state.profile || prev.seconds !== state.seconds ||
		    (prev.view === 'diff') !== (state.view === 'diff'))
			load();
		else
			render();
	});
	writeState(state, false);
	showControls();
	load();
}

init();
