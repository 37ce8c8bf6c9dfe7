// Talking to needle: fetch with the session's bearer token (asked for on 401), and one
// WebSocket for running queries that reconnects when the connection is lost.

const TOKEN_KEY = 'needle.token';

export class ApiError extends Error {
  constructor(
    message: string,
    public status: number,
    public body: { error?: string; line?: number; column?: number; hint?: string; kind?: string } = {},
  ) {
    super(message);
  }
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

let asking: Promise<void> | null = null;

/** Asks the person for a token (once at a time) and keeps it for the session. */
export function askToken(reason: string): Promise<void> {
  if (asking) return asking;
  asking = new Promise<void>((resolve) => {
    const dialog = document.getElementById('token-dialog') as HTMLDialogElement;
    const input = dialog.querySelector('input') as HTMLInputElement;
    (dialog.querySelector('.reason') as HTMLElement).textContent = reason;
    input.value = '';
    dialog.showModal();
    dialog.querySelector('form')!.onsubmit = (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      dialog.close();
      asking = null;
      resolve();
    };
  });
  return asking;
}

export async function api<T = unknown>(path: string, init: RequestInit = {}): Promise<T> {
  for (;;) {
    const headers = new Headers(init.headers);
    const t = token();
    if (t) headers.set('Authorization', `Bearer ${t}`);
    let response: Response;
    try {
      response = await fetch(path, { ...init, headers });
    } catch (e) {
      throw new ApiError(`cannot reach the server: ${(e as Error).message}`, 0);
    }
    if (response.status === 401) {
      // sent before the person gave a token (several requests start together): try again with it
      if (token() !== t) continue;
      const body = await response.json().catch(() => ({}));
      // ... or while this refusal was read: asking now would open the dialog a second time
      if (token() !== t) continue;
      await askToken(t ? `The token was refused: ${body.error ?? ''}` : 'This server needs a token.');
      continue;
    }
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* plain text */
    }
    if (!response.ok) {
      const b = (typeof body === 'object' && body ? body : { error: text }) as ApiError['body'];
      throw new ApiError(b.error ?? `${response.status} ${response.statusText}`, response.status, b);
    }
    return body as T;
  }
}

export interface Health {
  status: string;
  version: string;
  history?: { status: string; reason?: string };
}
export interface SchemaField {
  name: string;
  seen: number;
  fraction: number;
  types: Record<string, number>;
}
export interface Schema {
  sampled_records: number;
  fields: SchemaField[];
  untracked_fields?: number;
}
export interface Emission {
  records: Record<string, unknown>[];
  meta: Record<string, unknown>;
}

export type Handlers = {
  started?: (id: string) => void;
  result?: (e: Emission) => void;
  complete?: (dropped: number) => void;
  error?: (e: ApiError['body'] & { error: string }) => void;
};

/** One WebSocket for the page's queries; reconnects with backoff and says so. */
export class Socket {
  private ws: WebSocket | null = null;
  private byTag = new Map<string, Handlers>();
  private byId = new Map<string, Handlers>();
  private queue: string[] = [];
  private nextTag = 1;
  private retry = 500;
  onstate: (state: 'open' | 'lost' | 'connecting', detail?: string) => void = () => {};

  connect(): void {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const t = token();
    const url = `${proto}//${location.host}/api/v1/ws${t ? `?access_token=${encodeURIComponent(t)}` : ''}`;
    this.onstate('connecting');
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 500;
      this.onstate('open');
      for (const m of this.queue.splice(0)) ws.send(m);
    };
    ws.onmessage = (event) => this.receive(JSON.parse(event.data));
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      // The server lets go of a lost connection's queries (and stops those nobody else follows).
      for (const h of [...this.byId.values(), ...this.byTag.values()]) {
        h.error?.({ error: 'the connection to the server was lost; this page stopped following the query' });
      }
      this.byId.clear();
      this.byTag.clear();
      this.onstate('lost', `reconnecting in ${Math.round(this.retry / 1000)} s`);
      setTimeout(async () => {
        // A 401 here means a token is needed: ask through a plain request.
        await api('/api/v1/queries').catch(() => undefined);
        this.connect();
      }, this.retry);
      this.retry = Math.min(this.retry * 2, 10000);
    };
  }

  /** Starts a query; returns a function that kills it. */
  start(query: string, handlers: Handlers): () => void {
    const tag = `t${this.nextTag++}`;
    this.byTag.set(tag, handlers);
    let id: string | null = null;
    const wrapped: Handlers = {
      ...handlers,
      started: (i) => {
        id = i;
        handlers.started?.(i);
      },
    };
    this.byTag.set(tag, wrapped);
    this.send(JSON.stringify({ type: 'start', query, tag }));
    return () => {
      if (id) this.send(JSON.stringify({ type: 'kill', id }));
    };
  }

  /** Follows a query that is running already (started elsewhere: a shared link), beside its
   * other followers, from its next emission; returns a function that kills it. */
  follow(id: string, handlers: Handlers): () => void {
    this.byId.set(id, handlers);
    this.send(JSON.stringify({ type: 'resume', id }));
    return () => this.send(JSON.stringify({ type: 'kill', id }));
  }

  kill(id: string): void {
    this.send(JSON.stringify({ type: 'kill', id }));
  }

  private send(message: string): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(message);
    else this.queue.push(message);
    if (!this.ws) this.connect();
  }

  private receive(m: { type: string; id?: string; tag?: string; [k: string]: unknown }): void {
    if (m.type === 'started' && m.tag) {
      const h = this.byTag.get(m.tag);
      this.byTag.delete(m.tag);
      if (h && m.id) {
        this.byId.set(m.id, h);
        h.started?.(m.id);
      }
    } else if (m.type === 'resumed' && m.id) {
      this.byId.get(m.id)?.started?.(m.id);
    } else if (m.type === 'result' && m.id) {
      this.byId.get(m.id)?.result?.(m.result as Emission);
    } else if (m.type === 'complete' && m.id) {
      const h = this.byId.get(m.id);
      this.byId.delete(m.id);
      h?.complete?.((m.dropped as number) ?? 0);
    } else if (m.type === 'error') {
      const h = (m.tag && this.byTag.get(m.tag)) || (m.id && this.byId.get(m.id)) || null;
      if (m.tag) this.byTag.delete(m.tag);
      if (h) h.error?.(m as never);
      else console.warn('needle:', m.error);
    }
  }
}

/** `GET /api/v1/cluster`: the nodes, partitions and recent events the answering node knows. */
export interface ClusterNode {
  name: string;
  role: string;
  url: string;
  version: string;
  up_since_ms: number;
  last_heard_ms: number;
  alive: boolean;
  queries: number;
  records_read: number;
  partitions: { topic: string; partition: number; lag: number | null }[];
  history: { parts: number; bytes: number; records: number } | null;
  events: ClusterEvent[];
}
export interface ClusterEvent {
  at_ms: number;
  node: string;
  kind: string;
  text: string;
}
export interface Cluster {
  node: string;
  nodes: ClusterNode[];
  partitions: { topic: string; partition: number; worker: string; worker_alive: boolean; lag: number | null }[];
  events: ClusterEvent[];
}
