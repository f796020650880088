// SPDX-License-Identifier: Apache-2.0
//
// Drives Debian's headless Chromium through podprof's /debug/pprof/ui/ page
// with playwright-core (no browser download: executablePath is the system
// chromium). Called by test_ui.py, which starts podprof and the workloads
// and checks what this script reports against `go tool pprof`.
//
// usage: node drive.mjs BASE_URL TOKEN OUT_DIR PID
// Writes OUT_DIR/result.json, the downloaded profiles and screenshots.
// Everything it asserts itself is about the page's behaviour (states, URL,
// DOM); numbers are compared by the Python side.
import { createRequire } from 'node:module';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// playwright-core is a devDependency of web/ (web/package-lock.json).
const webDir = process.env.PODPROF_WEB || join(dirname(fileURLToPath(import.meta.url)), '../../web');
const { chromium } = createRequire(join(webDir, 'package.json'))('playwright-core');

const [base, token, out, pid] = process.argv.slice(2);
const ui = base + '/debug/pprof/ui/';
const result = { steps: {}, requests: [] };
const WAIT_MS = 120000; // generous: a loaded machine; never a timing assert

function check(cond, msg) {
	if (!cond)
		throw new Error(msg);
}

const t0 = Date.now();
const profileDir = mkdtempSync(join(tmpdir(), 'podprof-chromium-'));
// A fresh --user-data-dir (playwright passes it for a persistent context).
const ctx = await chromium.launchPersistentContext(profileDir, {
	executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
	headless: true,
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	       '--disable-background-networking', '--disable-component-update', '--disable-sync'],
	viewport: { width: 1400, height: 900 },
	acceptDownloads: true,
});
ctx.on('request', (r) => result.requests.push(r.url()));
const page = ctx.pages()[0] || await ctx.newPage();
process.stderr.write('drive: chromium up in ' + ((Date.now() - t0) / 1000).toFixed(1) + ' s\n');
const consoleErrors = [];
page.on('console', (m) => {
	if (m.type() === 'error')
		consoleErrors.push(m.text());
});
page.on('pageerror', (e) => consoleErrors.push(String(e)));

// The page says what it shows (web/src/main.js): #status's data-state for the
// data (loading, ready, error), #flame's data-state for the flame graph
// ("drawing" while d3-flame-graph's transitions move frames, "ready" when
// every frame is at its final place and width) with data-seq counting its
// changes. Every wait below is for one of these states, never for a time or
// for numbers in the DOM that an animation may still be changing.
async function ready() {
	await page.waitForFunction(() => {
		const s = document.getElementById('status').dataset.state;
		return s === 'ready' || s === 'error';
	}, null, { timeout: WAIT_MS, polling: 100 });
	const st = await page.$eval('#status', (e) => [e.dataset.state, e.textContent]);
	check(st[0] === 'ready', 'page state ' + st[0] + ': ' + st[1]);
	await flameSettled(0);
}

// The flame graph's change counter, read before an action on it.
const flameSeq = () => page.$eval('#flame', (e) => Number(e.dataset.seq || 0));

// Waits until the flame graph has settled after change number `after` (or
// its pane is hidden: the top view draws none). Returns its data attributes.
async function flameSettled(after) {
	await page.waitForFunction((n) => {
		const f = document.getElementById('flame');
		return document.getElementById('flame-pane').hidden ||
			(f.dataset.state === 'ready' && Number(f.dataset.seq) > n);
	}, after, { timeout: WAIT_MS, polling: 100 });
	return page.$eval('#flame', (e) => ({ ...e.dataset }));
}

// What the page shows: totals, table rows, flame graph frames, controls.
async function snapshot() {
	return page.evaluate(() => {
		const tot = document.getElementById('total');
		const rows = [...document.querySelectorAll('#top tbody tr')].map((tr) => ({
			name: tr.dataset.name, flat: Number(tr.dataset.flat), cum: Number(tr.dataset.cum),
		}));
		const frames = [...document.querySelectorAll('#flame svg g')].map((g) => {
			const t = g.querySelector('title');
			const r = g.querySelector('rect');
			return { title: t ? t.textContent : '', width: r ? Number(r.getAttribute('width')) : 0,
				 fill: r ? r.getAttribute('fill') : '' };
		});
		const sel = (id) => [...document.getElementById(id).options].map((o) => o.value);
		return {
			url: location.href,
			total: Number(tot.dataset.value), base: tot.dataset.base ? Number(tot.dataset.base) : null,
			unit: tot.dataset.unit, totalText: tot.textContent,
			si: document.getElementById('si').value, sampleTypes: sel('si'),
			pids: sel('pid'), pid: document.getElementById('pid').value,
			rows, frames,
			flameVisible: !document.getElementById('flame-pane').hidden,
		};
	});
}

async function download(selector, name) {
	const [dl] = await Promise.all([page.waitForEvent('download', { timeout: WAIT_MS }), page.click(selector)]);
	const path = join(out, name);
	await dl.saveAs(path);
	return path;
}

async function step(name, fn) {
	const t0 = Date.now();
	process.stderr.write('drive: ' + name + '\n');
	result.steps[name] = await fn();
	process.stderr.write('drive: ' + name + ' done in ' + ((Date.now() - t0) / 1000).toFixed(1) + ' s\n');
}

try {
	// 1. Without the token: the page loads (static files), the profile request
	// is refused; the page asks for a token (dismissed) and shows the 401.
	await step('no_token', async () => {
		let prompted = 0;
		const onDialog = (d) => {
			prompted++;
			d.dismiss();
		};
		page.on('dialog', onDialog);
		await page.goto(ui + '?profile=heap&view=top');
		await page.waitForFunction(() => document.getElementById('status').dataset.state === 'error',
					   null, { timeout: WAIT_MS, polling: 100 });
		page.off('dialog', onDialog);
		const text = await page.$eval('#status', (e) => e.textContent);
		check(/401/.test(text), 'no token: status ' + text);
		check(prompted >= 1, 'no token: the page did not ask for one');
		return { status: text, prompted };
	});

	// 2. Leak hunting: two heap snapshots 4 s apart; the leak grows. Early, while
	// the demo's cache is far from the size at which it starts over (~100 s).
	await step('heap_diff', async () => {
		// The token from the URL fragment (sessionStorage keeps it for the next steps).
		await page.goto(ui + '?profile=heap&view=diff&seconds=4&sort=cum#token=' + encodeURIComponent(token));
		await ready();
		const s = await snapshot();
		await page.screenshot({ path: join(out, 'heap-diff.png') });
		const after = await download('#download', 'heap-after.pb.gz');
		const before = await download('#download-base', 'heap-before.pb.gz');
		return { ...s, frames: s.frames.map((f) => f.title), after, before };
	});

	// 3. The token from the URL fragment again; it leaves the address bar at once.
	// A CPU window as a flame graph: search, zoom, reset; then the top table.
	await step('cpu', async () => {
		await page.goto(ui + '?profile=profile&seconds=3&view=flame#token=' + encodeURIComponent(token));
		await ready();
		const s = await snapshot();
		check(!s.url.includes('#') && !s.url.includes(token), 'token left in the URL: ' + s.url);
		check(/[?&]profile=profile(&|$)/.test(s.url) && /seconds=3/.test(s.url) && /view=flame/.test(s.url),
		      'URL lacks the view: ' + s.url);
		check(s.frames.length > 3, 'no flame graph frames');
		const file = await download('#download', 'cpu.pb.gz');
		await page.screenshot({ path: join(out, 'cpu-flame.png'), fullPage: false });

		// Search: matching frames turn magenta; the term goes into the URL.
		let seq = await flameSeq();
		await page.fill('#search', 'compress_response');
		await page.press('#search', 'Enter');
		const fs = await flameSettled(seq);
		check(fs.search === 'compress_response', 'flame graph searched for ' + fs.search);
		const searched = await snapshot();
		check(/search=compress_response/.test(searched.url), 'search not in the URL: ' + searched.url);
		const hits = searched.frames.filter((f) => f.fill && f.fill.toUpperCase() === '#E600E6');
		check(hits.length >= 1 && hits.every((f) => f.title.startsWith('compress_response:')),
		      'search highlighted ' + JSON.stringify(hits.map((f) => f.title)));

		// Zoom: clicking a frame widens it to the whole graph; reset undoes it.
		// The graph has settled: widths and order stay as read until the click.
		const fullWidth = Math.max(...searched.frames.map((f) => f.width));
		check(fullWidth === Number(fs.width), 'widest frame ' + fullWidth + ', graph ' + fs.width);
		const widest = (frames) => Math.max(0, ...frames.filter((f) => f.title.startsWith('compress_response:'))
			.map((f) => f.width));
		const before = widest(searched.frames);
		const idx = searched.frames.findIndex((f) => f.title.startsWith('compress_response:') && f.width === before);
		check(idx >= 0 && before > 0, 'no compress_response frame to click');
		seq = await flameSeq();
		// Not forced: playwright checks that the frame is visible, stable and
		// the one that receives the click.
		await page.locator('#flame svg g').nth(idx).click();
		const fz = await flameSettled(seq);
		check(fz.zoom === 'compress_response', 'zoomed into ' + JSON.stringify(fz.zoom));
		const zoomed = widest((await snapshot()).frames);
		seq = await flameSeq();
		await page.click('#reset');
		const fr = await flameSettled(seq);
		check(fr.zoom === '' && fr.search === '', 'reset left zoom ' + fr.zoom + ', search ' + fr.search);
		const reset = await snapshot();
		check(Math.abs(widest(reset.frames) - before) < 0.5, 'after reset compress_response is ' + widest(reset.frames) +
		      ' wide, was ' + before);
		check(!reset.frames.some((f) => f.fill && f.fill.toUpperCase() === '#E600E6'), 'reset kept the highlight');
		check(!/search=/.test(reset.url), 'reset kept the search in the URL');

		// The top table: no refetch, the URL says view=top, sorting by cum.
		const nreq = result.requests.length;
		await page.click('button.view[data-view="top"]');
		await page.waitForFunction(() => /view=top/.test(location.search), null, { timeout: WAIT_MS });
		const top = await snapshot();
		await page.click('button.sort[data-sort="cum"]');
		await page.waitForFunction(() => /sort=cum/.test(location.search), null, { timeout: WAIT_MS });
		const cum = await snapshot();
		check(result.requests.length === nreq, 'switching views fetched again');
		check(!top.flameVisible, 'flame graph shown in the top view');
		return { ...s, frames: s.frames.map((f) => f.title), file, zoomedWidth: zoomed, fullWidth,
			 targetWidth: before, topRows: top.rows, cumRows: cum.rows, topUrl: top.url, cumUrl: cum.url };
	});

	// 4. The same view again from its URL (a bookmark) and the process choice.
	await step('cpu_pid', async () => {
		await page.goto(ui + '?profile=profile&seconds=2&view=top&pid=' + pid);
		await ready();
		const s = await snapshot();
		check(s.pid === pid, 'pid selector shows ' + s.pid);
		const file = await download('#download', 'cpu-pid.pb.gz');
		return { ...s, frames: [], file };
	});

	// 5. The heap: top table then flame graph, every sample type offered.
	await step('heap', async () => {
		await page.goto(ui + '?profile=heap&view=top');
		await ready();
		const s = await snapshot();
		const file = await download('#download', 'heap.pb.gz');
		let seq = await flameSeq();
		await page.click('button.view[data-view="flame"]');
		await flameSettled(seq);
		const f = await snapshot();
		check(f.flameVisible && f.frames.length > 2, 'heap flame graph: ' + f.frames.length + ' frames');
		await page.screenshot({ path: join(out, 'heap-flame.png') });
		// Another sample type from the selector: the URL follows.
		seq = await flameSeq();
		await page.selectOption('#si', 'alloc_space');
		await flameSettled(seq);
		const a = await snapshot();
		check(a.si === 'alloc_space', 'sample type selector shows ' + a.si);
		return { ...s, file, frames: f.frames.map((x) => x.title), allocTotal: a.total, allocUrl: a.url };
	});

	// 6. The other profiles, one after the other from the selector.
	await step('others', async () => {
		const seen = {};
		for (const name of ['allocs', 'goroutine', 'block', 'mutex', 'threadcreate']) {
			await page.selectOption('#profile', name);
			await page.waitForFunction((n) => new URLSearchParams(location.search).get('profile') === n,
						   name, { timeout: WAIT_MS });
			await ready();
			const s = await snapshot();
			seen[name] = { total: s.total, si: s.si, unit: s.unit, url: s.url, sampleTypes: s.sampleTypes,
				       rows: s.rows.slice(0, 20), file: await download('#download', name + '.pb.gz') };
		}
		return seen;
	});

	// 7. Two CPU windows.
	await step('cpu_diff', async () => {
		await page.goto(ui + '?profile=profile&view=diff&seconds=2');
		await ready();
		const s = await snapshot();
		const after = await download('#download', 'cpu-after.pb.gz');
		const before = await download('#download-base', 'cpu-before.pb.gz');
		return { ...s, frames: s.frames.map((f) => f.title), after, before };
	});
	result.consoleErrors = consoleErrors;
} finally {
	writeFileSync(join(out, 'result.json'), JSON.stringify(result, null, 1));
	const t1 = Date.now();
	await ctx.close();
	process.stderr.write('drive: chromium closed in ' + ((Date.now() - t1) / 1000).toFixed(1) + ' s\n');
	rmSync(profileDir, { recursive: true, force: true });
}
