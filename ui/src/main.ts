// needle's web UI: pages (query, queries, schema, cluster), the editor, the builder and results.

import './style.css';
import 'uplot/dist/uPlot.min.css';
import { EditorView, keymap, lineNumbers, placeholder } from '@codemirror/view';
import { EditorState } from '@codemirror/state';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { autocompletion, completionKeymap, closeBrackets } from '@codemirror/autocomplete';
import { linter, lintGutter, forceLinting } from '@codemirror/lint';
import { syntaxHighlighting, defaultHighlightStyle } from '@codemirror/language';
import { api, ApiError, Socket, type Emission, type Handlers, type Health, type Schema } from './api';
import { bqlLanguage, complete, known, lint, lastValidation } from './bql';
import { VirtualTable, Chart, download, toCsv, type Row } from './results';
import { past, saved, uid } from './store';
import { mountBuilder } from './builderView';
import { fromBql } from './builderParse';
import { clusterPage } from './cluster';
import type { BuilderState } from './builder';

const app = document.getElementById('app')!;
const socket = new Socket();
let health: Health | null = null;
let schema: Schema | null = null;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') el.className = v;
    else el.setAttribute(k, v);
  }
  el.append(...children);
  return el;
}

export function banner(message: string | null, kind: 'error' | 'info' = 'error', about = ''): void {
  const b = document.getElementById('banner')!;
  b.hidden = !message;
  b.className = kind;
  b.dataset.about = message ? about : '';
  b.textContent = message ?? '';
}

// ---------------------------------------------------------------- connection state

socket.onstate = (state, detail) => {
  const pill = document.getElementById('conn')!;
  pill.dataset.state = state;
  pill.textContent = state === 'open' ? 'connected' : state === 'lost' ? `connection lost; ${detail}` : 'connecting…';
  if (state === 'lost') banner(`The connection to the server was lost; ${detail}.`, 'error', 'connection');
  // (only the connection's own message goes: the socket opening after a shared link's
  // "Following…" was shown, or a refusal, leaves those be)
  else if (state === 'open' && document.getElementById('banner')!.dataset.about === 'connection') banner(null);
};

// ---------------------------------------------------------------- query page

interface Run {
  id: string | null;
  kill: () => void;
  emissions: Emission[];
  rows: Row[];
  started: number;
  durationMs: number;
  windowed: boolean;
  raw: boolean;
  done: boolean;
}

let run: Run | null = null;
let editor: EditorView;
let pageQuery: HTMLElement | null = null;
/** The result pane shown: table, chart, json or meta. */
let shownTab = 'table';
const parts: { table?: VirtualTable; chart?: Chart; json?: HTMLElement; meta?: HTMLElement; status?: HTMLElement; progress?: HTMLProgressElement; explain?: HTMLElement; error?: HTMLElement } = {};

const DEFAULT_QUERY = "SELECT *\nFROM STREAM(10000, TIME)\nWHERE device = 'iphone'\nLIMIT 20";

function queryPage(): HTMLElement {
  if (pageQuery) return pageQuery;
  const editorHost = h('div', { class: 'editor', 'data-testid': 'editor' });
  const runBtn = h('button', { class: 'primary', 'data-testid': 'run', title: 'Ctrl+Enter' }, 'Run');
  const stopBtn = h('button', { 'data-testid': 'stop', disabled: '' }, 'Stop');
  const saveBtn = h('button', { 'data-testid': 'save' }, 'Save');
  const shareBtn = h('button', { 'data-testid': 'share', title: 'copy a link that opens this query' }, 'Share link');
  const builderBtn = h('button', { 'data-testid': 'builder-toggle' }, 'Builder');
  const range = h('select', { 'data-testid': 'range', title: 'look back into the stored history' });
  for (const [v, t] of [
    ['', 'Live only'],
    ['since:-15m', 'Live, since 15 minutes ago'],
    ['history:-15m', 'Last 15 minutes (history)'],
    ['history:-1h', 'Last hour (history)'],
    ['history:-1d', 'Last day (history)'],
    ['custom', 'Custom range…'],
  ]) range.append(h('option', { value: v }, t));
  const rangeWrap = h('label', { class: 'range', hidden: '' }, 'Look back ', range);
  const toolbar = h('div', { class: 'toolbar' }, runBtn, stopBtn, saveBtn, shareBtn, builderBtn, rangeWrap);
  const builderHost = h('div', { class: 'builder', hidden: '', 'data-testid': 'builder' });
  const explain = h('div', { class: 'explain', 'data-testid': 'explain' });
  const error = h('div', { class: 'error', 'data-testid': 'error', hidden: '' });
  const status = h('span', { class: 'status', 'data-testid': 'status' }, 'Write a query and press Run (Ctrl+Enter).');
  const progress = h('progress', { max: '1', value: '0', 'data-testid': 'progress' });
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const panes: Record<string, HTMLElement> = {
    table: h('div', { class: 'pane', 'data-testid': 'table' }),
    chart: h('div', { class: 'pane chart', 'data-testid': 'chart' }),
    json: h('pre', { class: 'pane json', 'data-testid': 'json' }),
    meta: h('pre', { class: 'pane json', 'data-testid': 'meta' }),
  };
  for (const name of Object.keys(panes)) {
    const b = h('button', { role: 'tab', 'data-tab': name }, name[0].toUpperCase() + name.slice(1));
    b.onclick = () => showTab(name);
    tabs.append(b);
  }
  const downloads = h('span', { class: 'downloads' }, 'Download: ');
  for (const [k, label] of [['json', 'JSON'], ['csv', 'CSV'], ['flat', 'flattened CSV']]) {
    const b = h('button', { 'data-download': k }, label);
    b.onclick = () => {
      if (!run) return banner('Nothing to download yet: run a query first.', 'info');
      if (k === 'json') download('needle-result.json', JSON.stringify(run.emissions, null, 2), 'application/json');
      else download(k === 'flat' ? 'needle-result-flat.csv' : 'needle-result.csv', toCsv(resultRows(run), k === 'flat'), 'text/csv');
    };
    downloads.append(b);
  }
  const results = h('section', { class: 'results' }, h('div', { class: 'result-bar' }, tabs, status, progress, downloads), ...Object.values(panes));
  const page = h('section', { class: 'page', id: 'page-query' }, h('div', { class: 'query-top' }, h('div', { class: 'query-edit' }, editorHost, toolbar, error, explain), builderHost), results);

  function showTab(name: string) {
    for (const [k, p] of Object.entries(panes)) p.hidden = k !== name;
    tabs.querySelectorAll('button').forEach((b) => b.setAttribute('aria-selected', String(b.dataset.tab === name)));
    shownTab = name;
    if (run) drawShownPane(run);
  }
  showTab('table');

  parts.table = new VirtualTable(panes.table);
  parts.chart = new Chart(panes.chart);
  parts.chart.clear();
  parts.json = panes.json;
  parts.meta = panes.meta;
  parts.status = status;
  parts.progress = progress;
  parts.explain = explain;
  parts.error = error;

  editor = new EditorView({
    parent: editorHost,
    state: EditorState.create({
      doc: initialQuery() ?? DEFAULT_QUERY,
      extensions: [
        lineNumbers(),
        history(),
        closeBrackets(),
        placeholder('SELECT ... FROM STREAM(30000, TIME) ...'),
        bqlLanguage,
        syntaxHighlighting(defaultHighlightStyle),
        autocompletion({ override: [complete] }),
        linter(lint, { delay: 300 }),
        lintGutter(),
        keymap.of([
          { key: 'Mod-Enter', run: () => (start(), true) },
          ...completionKeymap,
          ...defaultKeymap,
          ...historyKeymap,
        ]),
        EditorView.lineWrapping,
      ],
    }),
  });
  lastValidation.listeners.push((v) => {
    explain.textContent = v.ok ? v.explain ?? '' : '';
    explain.hidden = !v.ok;
    error.hidden = v.ok;
    if (!v.ok && v.error) {
      const where = v.error.line ? `line ${v.error.line}, column ${v.error.column}: ` : '';
      error.textContent = `${where}${v.error.error}${v.error.hint ? ` — hint: ${v.error.hint}` : ''}`;
    }
  });

  runBtn.onclick = start;
  stopBtn.onclick = stop;
  saveBtn.onclick = () => {
    const query = editor.state.doc.toString();
    const name = prompt('Name this query', query.split('\n')[0].slice(0, 60));
    if (name === null) return;
    saved.put({ id: uid(), name: name || 'query', query, saved: Date.now() });
    banner(`Saved “${name}”: find it on the Queries page.`, 'info');
  };
  shareBtn.onclick = async () => {
    // while it runs, the link opens the running query itself (its results as they come)
    const following = run && !run.done && run.id ? `&id=${encodeURIComponent(run.id)}` : '';
    const link = `${location.origin}${location.pathname}#/query?q=${encodeURIComponent(editor.state.doc.toString())}${following}`;
    history_replace(link);
    const what = following ? 'it opens this query and follows it while it runs' : 'it opens this query';
    try {
      await navigator.clipboard.writeText(link);
      banner(`Link copied: ${what}.`, 'info');
    } catch {
      banner(`Link to this query (${what}): ${link}`, 'info');
    }
  };
  builderBtn.onclick = () => {
    builderHost.hidden = !builderHost.hidden;
    if (builderHost.hidden) return;
    // the builder shows the editor's query, read back, whenever it opens
    const text = editor.state.doc.toString().trim();
    let initial: BuilderState | undefined;
    if (text) {
      try {
        initial = fromBql(text);
      } catch (e) {
        const fresh = h('button', { 'data-testid': 'builder-start-empty' }, 'Start from an empty form');
        fresh.onclick = () => mountBuilder(builderHost, () => schema, (bql) => setQuery(bql));
        const why = `The builder has no form for this query: ${(e as Error).message}. Edit it in the editor, or start from an empty form (it replaces the query).`;
        builderHost.replaceChildren(h('p', { class: 'muted', 'data-testid': 'builder-note' }, why), fresh);
        return;
      }
    }
    mountBuilder(builderHost, () => schema, (bql) => setQuery(bql), initial);
  };
  range.onchange = () => {
    let v = range.value;
    if (v === 'custom') {
      const from = prompt('From (e.g. -2h, 2026-11-24T10:00:00Z or ms since the epoch)', '-30m');
      if (!from) return;
      const to = prompt('To (empty for now)', '') ?? '';
      v = `history:${from}${to ? `|${to}` : ''}`;
    }
    setQuery(applyRange(editor.state.doc.toString(), v));
  };
  const showRange = () => (rangeWrap.hidden = !health?.history);
  showRange();
  onHealth.push(showRange);

  function setRunning(running: boolean) {
    runBtn.disabled = running;
    stopBtn.disabled = !running;
  }
  setRunningHook = setRunning;
  pageQuery = page;
  return page;
}

let setRunningHook: (running: boolean) => void = () => {};
const onHealth: (() => void)[] = [];

function history_replace(url: string) {
  window.history.replaceState(null, '', url);
}

/** The query text and running query id a link carries (`#/query?q=TEXT&id=ID`). */
function linked(): { query: string | null; id: string | null } {
  const m = location.hash.match(/^#\/query\?(.*)$/);
  if (!m) return { query: null, id: null };
  const params = new URLSearchParams(m[1]);
  return { query: params.get('q'), id: params.get('id') };
}

function initialQuery(): string | null {
  return linked().query;
}

export function setQuery(text: string): void {
  editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
  forceLinting(editor);
}

/** Rewrites the FROM clause for a look-back choice: `since:-15m`, `history:from|to`, or live. */
export function applyRange(query: string, choice: string): string {
  const fromRe = /FROM\s+(STREAM\s*\([^)]*\)(\s+SINCE\s+('[^']*'|\d+))?|HISTORY\s*\([^)]*\))/i;
  const m = query.match(fromRe);
  const duration = m && /STREAM\s*\(([^)]*)\)/i.exec(m[1])?.[1];
  const stream = `STREAM(${duration && duration.trim() ? duration : '30000, TIME'})`;
  const q = (t: string) => (/^\d+$/.test(t) ? t : `'${t.replace(/'/g, "''")}'`);
  let from: string;
  if (choice.startsWith('since:')) from = `${stream} SINCE ${q(choice.slice(6))}`;
  else if (choice.startsWith('history:')) {
    const [a, b] = choice.slice(8).split('|');
    from = b ? `HISTORY(${q(a)}, ${q(b)})` : `HISTORY(${q(a)})`;
  } else from = stream;
  return m ? query.replace(fromRe, `FROM ${from}`) : query;
}

function resultRows(r: Run): Row[] {
  return r.raw ? r.rows : r.emissions[r.emissions.length - 1]?.records ?? [];
}

function durationOf(query: string): number {
  const m = query.match(/STREAM\s*\(\s*(\d+)\s*,\s*TIME\s*\)/i);
  return m ? Number(m[1]) : 0;
}

function start(): void {
  const query = editor.state.doc.toString().trim();
  if (!query) return banner('Write a query first.', 'info');
  track(query, Date.now(), durationOf(query), (handlers) => socket.start(query, handlers));
}

/** Opens a running query a link named (`&id=`): follows it beside its other clients while it
 * runs, from its next emission; a query that ended is left in the editor to run again. */
async function followLinked(id: string): Promise<void> {
  let status: { query: string; running: boolean; received_ms: number; ends_ms: number };
  try {
    status = await api(`/api/v1/queries/${encodeURIComponent(id)}`);
  } catch (e) {
    return banner(`The shared query ${id} is not on this server (${(e as Error).message}): press Run to run it again.`, 'info');
  }
  if (!status.running) return banner(`The shared query ${id} has ended: press Run to run it again.`, 'info');
  if (status.query && status.query !== editor.state.doc.toString()) setQuery(status.query);
  const durationMs = Math.max(0, status.ends_ms - status.received_ms);
  track(status.query, status.received_ms, durationMs, (handlers) => socket.follow(id, handlers));
  banner(`Following the running query ${id}, beside its other clients: results from now on.`, 'info');
}

/** Shows a run of `query` (started at `started`, ms since the epoch): its results as they come
 * through the handlers `open` connects; what `open` returns kills it. */
function track(query: string, started: number, durationMs: number, open: (handlers: Handlers) => () => void): void {
  if (run && !run.done) run.kill();
  banner(null);
  const windowed = /\bWINDOWING\b/i.test(query);
  const r: Run = {
    id: null,
    kill: () => {},
    emissions: [],
    rows: [],
    started,
    durationMs,
    windowed,
    raw: true,
    done: false,
  };
  run = r;
  parts.chart!.clear();
  parts.table!.set([]);
  parts.json!.textContent = '';
  parts.meta!.textContent = '';
  parts.progress!.value = 0;
  parts.status!.textContent = 'Starting…';
  setRunningHook(true);
  const timer = setInterval(() => {
    if (r.done || run !== r) return clearInterval(timer);
    const elapsed = Date.now() - r.started;
    if (r.durationMs > 0) parts.progress!.value = Math.min(1, elapsed / r.durationMs);
    parts.status!.textContent = statusText(r);
  }, 250);
  let pending = 0;
  const redraw = () => {
    pending = 0;
    if (run !== r) return;
    parts.table!.set(resultRows(r));
    drawShownPane(r);
    parts.status!.textContent = statusText(r);
  };
  r.kill = open({
    started: (id) => {
      r.id = id;
      parts.status!.textContent = `Running ${id}…`;
    },
    result: (e) => {
      r.emissions.push(e);
      const recordsLook = e.records.length > 0 ? Object.keys(e.records[0]) : [];
      // Aggregates replace the table with each emission; raw records accumulate.
      r.raw = !/\b(COUNT|SUM|MIN|MAX|AVG|QUANTILE|FREQ|CUMFREQ|TOP)\s*\(|\bGROUP\s+BY\b|\bDISTINCT\b/i.test(query) && !recordsLook.includes('Quantile');
      if (r.raw) for (const rec of e.records) r.rows.push(rec);
      if (!pending) pending = requestAnimationFrame(redraw);
    },
    complete: (dropped) => {
      r.done = true;
      parts.progress!.value = 1;
      redraw();
      parts.status!.textContent = statusText(r) + (dropped ? ` — ${dropped} results were dropped (too slow to keep up)` : '');
      setRunningHook(false);
      past.add({ id: r.id ?? uid(), query, at: r.started, rows: resultRows(r), total: resultRows(r).length });
    },
    error: (e) => {
      r.done = true;
      setRunningHook(false);
      const where = e.line ? ` (line ${e.line}, column ${e.column})` : '';
      parts.status!.textContent = 'Refused.';
      banner(`The server refused the query${where}: ${e.error}${e.hint ? ` — hint: ${e.hint}` : ''}`);
      parts.progress!.value = 0;
    },
  });
}

/** Draws the JSON, metadata or chart pane when it is the one shown (a hidden pane is drawn
 * when its tab is chosen): redrawing all of them at every frame of a fast stream kept the
 * page's main thread busy past 100 ms at a time. RAW records get no chart. */
function drawShownPane(r: Run): void {
  if (shownTab === 'json') {
    const shown = r.emissions.slice(-20);
    parts.json!.textContent = JSON.stringify(r.raw ? r.rows.slice(0, 2000) : shown.map((e) => e.records), null, 2) + (r.raw && r.rows.length > 2000 ? `\n… ${r.rows.length - 2000} more rows (download to get them all)` : '');
  } else if (shownTab === 'meta') {
    parts.meta!.textContent = JSON.stringify(r.emissions[r.emissions.length - 1]?.meta ?? {}, null, 2);
  } else if (shownTab === 'chart' && !r.raw) {
    parts.chart!.update(r.emissions, r.windowed);
  }
}

function statusText(r: Run): string {
  const secs = ((Date.now() - r.started) / 1000).toFixed(1);
  const rows = resultRows(r).length;
  const state = r.done ? 'Done' : 'Running';
  return `${state}: ${rows.toLocaleString()} row${rows === 1 ? '' : 's'}, ${r.emissions.length} result${r.emissions.length === 1 ? '' : 's'}${r.windowed ? ' (windows)' : ''}, ${secs} s`;
}

function stop(): void {
  if (!run || run.done) return;
  run.kill();
  parts.status!.textContent = 'Stopping…';
}

// ---------------------------------------------------------------- queries page

function queriesPage(): HTMLElement {
  const server = h('div', { 'data-testid': 'server-queries' }, 'Loading…');
  const savedList = h('div', { 'data-testid': 'saved' });
  const pastList = h('div', { 'data-testid': 'past' });
  const page = h(
    'section',
    { class: 'page', id: 'page-queries' },
    h('h2', {}, 'Running on the server'),
    server,
    h('h2', {}, 'Saved queries ', clearBtn(() => (saved.clear(), renderSaved()))),
    savedList,
    h('h2', {}, 'Past results ', clearBtn(() => (past.clear(), renderPast()))),
    pastList,
  );
  function clearBtn(f: () => void) {
    const b = h('button', { class: 'small' }, 'clear');
    b.onclick = () => confirm('Clear them all?') && f();
    return b;
  }
  async function renderServer() {
    try {
      const r = await api<{ queries: Record<string, unknown>[] }>('/api/v1/queries');
      if (r.queries.length === 0) {
        server.replaceChildren(h('p', { class: 'muted' }, 'Nothing running.'));
        return;
      }
      const table = h('table', { class: 'list' });
      const keys = ['id', 'query', 'records_seen', 'records_matched', 'emissions', 'time_left_ms'];
      table.append(h('tr', {}, ...keys.map((k) => h('th', {}, k)), h('th', {}, 'progress'), h('th', {})));
      for (const q of r.queries) {
        const kill = h('button', { class: 'danger small', 'data-kill': String(q.id) }, 'Kill');
        kill.onclick = async () => {
          try {
            await api(`/api/v1/queries/${encodeURIComponent(String(q.id))}`, { method: 'DELETE' });
          } catch (e) {
            banner(`Could not kill ${q.id}: ${(e as Error).message}`);
          }
          renderServer();
        };
        // Progress from the server's own clock: time left of the whole duration.
        const total = Number(q.ends_ms) - Number(q.received_ms);
        const left = Number(q.time_left_ms);
        const fraction = total > 0 && Number.isFinite(left) ? Math.min(1, Math.max(0, 1 - left / total)) : 0;
        const prog = h('progress', { max: '1', value: String(fraction), title: `${Math.round(fraction * 100)}%` });
        table.append(h('tr', { 'data-query': String(q.id) }, ...keys.map((k) => h('td', {}, String(q[k] ?? ''))), h('td', {}, prog), h('td', {}, kill)));
      }
      server.replaceChildren(table);
    } catch (e) {
      server.replaceChildren(h('p', { class: 'error' }, `Cannot list the server's queries: ${(e as Error).message}`));
    }
  }
  function renderSaved() {
    const items = saved.list();
    if (items.length === 0) return savedList.replaceChildren(h('p', { class: 'muted' }, 'No saved queries: use Save on the Query page.'));
    savedList.replaceChildren(
      ...items.map((s) => {
        const open = h('button', { class: 'small' }, 'Edit');
        open.onclick = () => openQuery(s.query);
        const copy = h('button', { class: 'small' }, 'Copy');
        copy.onclick = () => navigator.clipboard?.writeText(s.query).then(() => banner('Copied.', 'info'), () => banner('Copy failed: the browser refused the clipboard.'));
        const del = h('button', { class: 'small danger' }, 'Delete');
        del.onclick = () => (saved.remove(s.id), renderSaved());
        return h('div', { class: 'item', 'data-saved': s.name }, h('strong', {}, s.name), h('pre', {}, s.query), open, copy, del);
      }),
    );
  }
  function renderPast() {
    const items = past.list();
    if (items.length === 0) return pastList.replaceChildren(h('p', { class: 'muted' }, 'No past results yet.'));
    pastList.replaceChildren(
      ...items.map((p) => {
        const open = h('button', { class: 'small' }, 'Edit query');
        open.onclick = () => openQuery(p.query);
        const dl = h('button', { class: 'small' }, 'Download JSON');
        dl.onclick = () => download('needle-past.json', JSON.stringify(p.rows, null, 2), 'application/json');
        const del = h('button', { class: 'small danger' }, 'Delete');
        del.onclick = () => (past.remove(p.id), renderPast());
        return h('div', { class: 'item' }, h('strong', {}, `${new Date(p.at).toLocaleString()} — ${p.total} rows`), h('pre', {}, p.query), open, dl, del);
      }),
    );
  }
  renderServer();
  renderSaved();
  renderPast();
  const timer = setInterval(() => (page.isConnected ? renderServer() : clearInterval(timer)), 1000);
  return page;
}

function openQuery(query: string) {
  location.hash = '#/query';
  queueMicrotask(() => setQuery(query));
}

// ---------------------------------------------------------------- schema page

function schemaPage(): HTMLElement {
  const body = h('div', { 'data-testid': 'schema' }, 'Loading…');
  const page = h('section', { class: 'page', id: 'page-schema' }, h('h2', {}, 'Fields seen in the stream'), body);
  loadSchema().then(
    (s) => {
      if (s.fields.length === 0) return body.replaceChildren(h('p', { class: 'muted' }, 'No records sampled yet: is the source sending anything?'));
      const table = h('table', { class: 'list' });
      table.append(h('tr', {}, h('th', {}, 'field'), h('th', {}, 'types'), h('th', {}, 'seen'), h('th', {}, 'how often')));
      for (const f of s.fields) {
        const nested = f.name.includes('.');
        const pct = Math.round(f.fraction * 100);
        table.append(
          h(
            'tr',
            { class: nested ? 'nested' : '' },
            h('td', {}, nested ? `  ↳ ${f.name}` : f.name),
            h('td', {}, Object.entries(f.types).map(([t, n]) => `${t} (${n})`).join(', ')),
            h('td', {}, String(f.seen)),
            h('td', {}, h('span', { class: 'bar', style: `--w:${pct}%` }), ` ${pct}%`),
          ),
        );
      }
      body.replaceChildren(h('p', { class: 'muted' }, `From ${s.sampled_records} sampled records; nested keys are indented under their map.${s.untracked_fields ? ` ${s.untracked_fields} more fields not tracked.` : ''}`), table);
    },
    (e) => body.replaceChildren(h('p', { class: 'error' }, `Cannot read the schema: ${(e as Error).message}`)),
  );
  return page;
}

async function loadSchema(): Promise<Schema> {
  schema = await api<Schema>('/api/v1/schema');
  known.sampled = schema.sampled_records;
  known.fields = schema.fields.map((f) => ({ name: f.name, type: Object.keys(f.types)[0] ?? '' }));
  return schema;
}

// ---------------------------------------------------------------- routing and start

function route(): void {
  const page = (location.hash.match(/^#\/(\w+)/)?.[1] ?? 'query') as 'query' | 'queries' | 'schema' | 'cluster';
  document.querySelectorAll<HTMLAnchorElement>('nav a').forEach((a) => a.setAttribute('aria-current', String(a.dataset.page === page)));
  const el = page === 'queries' ? queriesPage() : page === 'schema' ? schemaPage() : page === 'cluster' ? clusterPage(h) : queryPage();
  if (app.firstChild !== el) app.replaceChildren(el);
  if (page === 'query') {
    const { query: q, id } = linked();
    if (q !== null && q !== editor.state.doc.toString()) setQuery(q);
    if (id && (!run || run.id !== id)) void followLinked(id);
  }
}

window.addEventListener('hashchange', route);
route();
socket.connect();
api<Health>('/healthz')
  .then((hh) => {
    health = hh;
    const pill = document.getElementById('history-pill')!;
    pill.hidden = !hh.history;
    if (hh.history) pill.textContent = `history: ${hh.history.status}`;
    onHealth.forEach((f) => f());
  })
  .catch((e) => banner(`Cannot reach the server: ${(e as ApiError).message}`));
// The schema grows as the stream is sampled: read it again, often while little is known (just
// after the server started), then every half minute, and lint again with what is new.
async function refreshSchema(): Promise<void> {
  const before = known.sampled;
  try {
    await loadSchema();
    if (known.sampled !== before) forceLinting(editor);
  } catch {
    // the banner of the health check says when the server cannot be reached
  }
  setTimeout(refreshSchema, known.sampled < 100 ? 2_000 : 30_000);
}
void refreshSchema();
// For the end-to-end tests and the console: read and write the editor's text, and the rows of
// the last run.
Object.assign(window, {
  needle: { get: () => editor.state.doc.toString(), set: setQuery, rows: () => (run ? resultRows(run) : []) },
  needleReady: performance.now(),
});
document.body.dataset.ready = 'true';
