// The Cluster page: every node the server knows of (role, name, URL, version, up since, last
// heard, queries, history), the data topic's partitions with their worker and consumer lag,
// and recent rebalances and adoptions, from `GET /api/v1/cluster`, read again every 2 s.

import { api, type Cluster, type ClusterNode } from './api';

type H = <K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, string>, ...children: (Node | string)[]) => HTMLElementTagNameMap[K];

/** "3 s ago", "4 min ago", "2 h ago". */
export function ago(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

/** 1.5 MB, 320 KB, 12 B. */
export function bytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) (n /= 1000), i++;
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

export function clusterPage(h: H): HTMLElement {
  const summary = h('p', { class: 'muted', 'data-testid': 'cluster-summary' }, 'Loading…');
  const nodes = h('div', { 'data-testid': 'cluster-nodes' });
  const partitions = h('div', { 'data-testid': 'cluster-partitions' });
  const events = h('div', { 'data-testid': 'cluster-events' });
  const page = h(
    'section',
    { class: 'page', id: 'page-cluster' },
    h('h2', {}, 'Nodes'),
    summary,
    nodes,
    h('h2', {}, 'Partitions of the data topic'),
    partitions,
    h('h2', {}, 'Recent rebalances and adoptions'),
    events,
  );
  const render = (c: Cluster) => {
    const now = Date.now();
    const live = c.nodes.filter((n) => n.alive).length;
    summary.textContent = `${c.nodes.length} node(s), ${live} alive, as ${c.node} knows them.`;
    const table = h('table', { class: 'list' });
    table.append(h('tr', {}, ...['name', 'role', 'state', 'URL', 'version', 'up since', 'last heard', 'queries', 'records read', 'history'].map((k) => h('th', {}, k))));
    for (const n of c.nodes) table.append(nodeRow(h, n, now, n.name === c.node));
    nodes.replaceChildren(table);
    if (c.partitions.length === 0) {
      partitions.replaceChildren(h('p', { class: 'muted' }, 'No partitioned source read by a live node (a single process reading a file, a generator or a socket; or no worker heard from).'));
    } else {
      const t = h('table', { class: 'list' });
      t.append(h('tr', {}, ...['topic', 'partition', 'worker', 'consumer lag'].map((k) => h('th', {}, k))));
      for (const p of c.partitions) t.append(h('tr', { 'data-partition': String(p.partition) }, h('td', {}, p.topic), h('td', {}, String(p.partition)), h('td', {}, p.worker_alive ? p.worker : `${p.worker} (gone: not moved yet)`), h('td', {}, p.lag === null ? '…' : String(p.lag))));
      partitions.replaceChildren(t);
    }
    if (c.events.length === 0) {
      events.replaceChildren(h('p', { class: 'muted' }, 'None lately.'));
    } else {
      const t = h('table', { class: 'list' });
      t.append(h('tr', {}, ...['when', 'node', 'what', ''].map((k) => h('th', {}, k))));
      for (const e of c.events) t.append(h('tr', { 'data-kind': e.kind }, h('td', {}, new Date(e.at_ms).toLocaleTimeString()), h('td', {}, e.node), h('td', {}, e.kind), h('td', {}, e.text)));
      events.replaceChildren(t);
    }
  };
  const load = () =>
    api<Cluster>('/api/v1/cluster').then(render, (e) => summary.replaceChildren(h('span', { class: 'error' }, `Cannot read the cluster: ${(e as Error).message}`)));
  void load();
  const timer = setInterval(() => (page.isConnected ? void load() : clearInterval(timer)), 2000);
  return page;
}

function nodeRow(h: H, n: ClusterNode, now: number, answering: boolean): HTMLTableRowElement {
  const state = h('span', { class: 'pill', 'data-state': n.alive ? 'open' : 'lost' }, n.alive ? 'up' : 'gone');
  const url = n.url ? h('a', { href: n.url }, n.url) : '';
  const history = n.history ? `${n.history.parts} parts, ${bytes(n.history.bytes)}` : '';
  const reads = n.partitions.length ? ` (partitions ${n.partitions.map((p) => p.partition).join(', ')})` : '';
  return h(
    'tr',
    { 'data-node': n.name, 'data-alive': String(n.alive) },
    h('td', {}, answering ? `${n.name} (this one)` : n.name),
    h('td', {}, n.role),
    h('td', {}, state),
    h('td', {}, url),
    h('td', {}, n.version),
    h('td', {}, new Date(n.up_since_ms).toLocaleString()),
    h('td', {}, ago(n.last_heard_ms, now)),
    h('td', {}, String(n.queries)),
    h('td', {}, `${n.records_read}${reads}`),
    h('td', {}, history),
  );
}
