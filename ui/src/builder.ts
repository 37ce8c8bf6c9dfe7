// The query builder's model and the BQL it writes. Pure: no DOM, unit-tested in test/.

export type FieldType = 'STRING' | 'NUMBER' | 'BOOLEAN' | 'MAP' | 'LIST' | 'ANY';

export interface Condition {
  kind: 'cond';
  field: string;
  op: string;
  value: string;
  /** The value was written as a number (a query read back): kept a number whatever the field's
   * type in the schema. */
  numeric?: boolean;
  /** The value was written as a string (a query read back): kept quoted, even `true`. */
  text?: boolean;
}
export interface Group {
  kind: 'group';
  join: 'AND' | 'OR';
  items: (Condition | Group)[];
}
export interface Renamed {
  field: string;
  as?: string;
}
export interface Metric {
  fn: 'COUNT' | 'SUM' | 'MIN' | 'MAX' | 'AVG';
  field?: string;
  as?: string;
}
export type Output =
  | { kind: 'raw'; fields: Renamed[] }
  | { kind: 'countDistinct'; fields: string[]; as?: string }
  | { kind: 'groupBy'; groups: string[]; metrics: Metric[] }
  | {
      kind: 'distribution';
      type: 'QUANTILE' | 'FREQ' | 'CUMFREQ';
      field: string;
      points:
        | { mode: 'LINEAR'; n: number }
        | { mode: 'REGION'; start: number; end: number; step: number }
        | { mode: 'MANUAL'; values: number[] };
    }
  | { kind: 'topK'; k: number; threshold?: number; fields: string[]; as?: string };
export type Window =
  | { kind: 'none' }
  | { kind: 'tumbling'; ms: number }
  | { kind: 'additive'; ms: number }
  | { kind: 'sliding'; records: number };
export type Source =
  | { kind: 'stream' }
  | { kind: 'since'; from: string }
  | { kind: 'history'; from: string; to?: string };

export interface BuilderState {
  filter: Group;
  output: Output;
  window: Window;
  durationMs: number;
  limit?: number;
  source: Source;
}

export function emptyState(): BuilderState {
  return {
    filter: { kind: 'group', join: 'AND', items: [] },
    output: { kind: 'raw', fields: [] },
    window: { kind: 'none' },
    durationMs: 30000,
    limit: 10,
    source: { kind: 'stream' },
  };
}

/** Operators offered for a field of each type, in the order shown. */
export function operatorsFor(type: FieldType): string[] {
  const nullness = ['IS NULL', 'IS NOT NULL'];
  switch (type) {
    case 'STRING':
      return ['=', '!=', 'RLIKE', 'NOT RLIKE', 'IN', 'NOT IN', 'SIZEOF =', 'SIZEOF >', ...nullness];
    case 'NUMBER':
      return ['=', '!=', '<', '<=', '>', '>=', 'BETWEEN', 'IN', 'NOT IN', ...nullness];
    case 'BOOLEAN':
      return ['IS TRUE', 'IS FALSE', ...nullness];
    case 'MAP':
      return ['CONTAINSKEY', 'CONTAINSVALUE', 'SIZEOF =', 'SIZEOF >', ...nullness];
    case 'LIST':
      return ['CONTAINSVALUE', 'SIZEOF =', 'SIZEOF >', ...nullness];
    default:
      return ['=', '!=', '<', '>', 'RLIKE', 'IN', ...nullness];
  }
}

/** Whether an operator takes a value. */
export function takesValue(op: string): boolean {
  return !['IS NULL', 'IS NOT NULL', 'IS TRUE', 'IS FALSE'].includes(op);
}

const RESERVED = new Set(
  'SELECT FROM WHERE GROUP HAVING ORDER WINDOWING LIMIT LATERAL AS DISTINCT AND OR XOR NOT IN IS NULL TRUE FALSE BETWEEN RLIKE NOW ANY ALL'.split(
    ' ',
  ),
);

/** A field reference: plain names and `a.b` paths as they are, anything else double-quoted. */
export function name(field: string): string {
  return field
    .split('.')
    .map((part) => {
      if (/^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?$/.test(part) && !RESERVED.has(part.toUpperCase())) {
        return part;
      }
      return '"' + part.replace(/"/g, '""') + '"';
    })
    .join('.');
}

/** An alias: always a plain name or a quoted one. */
function alias(as: string | undefined): string {
  if (!as || !as.trim()) return '';
  const a = as.trim();
  return ' AS ' + (/^[A-Za-z_][A-Za-z0-9_]*$/.test(a) && !RESERVED.has(a.toUpperCase()) ? a : '"' + a.replace(/"/g, '""') + '"');
}

/** A literal: a number as is when it is one, TRUE/FALSE/NULL as words, anything else a string. */
export function literal(value: string, numeric = false, text = false): string {
  const v = value.trim();
  if (text) return "'" + v.replace(/'/g, "''") + "'";
  if (numeric && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(v)) return v;
  if (/^(true|false|null)$/i.test(v) && !numeric) return v.toUpperCase();
  if (/^-?\d+(\.\d+)?$/.test(v) && numeric) return v;
  return "'" + v.replace(/'/g, "''") + "'";
}

/** Splits `a, b, 'c, d'` on commas outside quotes. */
export function splitList(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of text) {
    if (ch === "'") quoted = !quoted;
    if (ch === ',' && !quoted) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter((s) => s.length > 0).map((s) => s.replace(/^'(.*)'$/, '$1'));
}

function condition(c: Condition, types: Record<string, FieldType>): string {
  const f = name(c.field);
  const numeric = types[c.field] === 'NUMBER' || c.numeric === true;
  const list = () => '(' + splitList(c.value).map((v) => literal(v, numeric, c.text)).join(', ') + ')';
  switch (c.op) {
    case 'IS NULL':
    case 'IS NOT NULL':
      return `${f} ${c.op}`;
    case 'IS TRUE':
      return `${f} = TRUE`;
    case 'IS FALSE':
      return `${f} = FALSE`;
    case 'IN':
    case 'NOT IN':
      return `${f} ${c.op} ${list()}`;
    case 'BETWEEN': {
      const [lo = '', hi = ''] = splitList(c.value);
      return `${f} BETWEEN (${literal(lo, true)}, ${literal(hi, true)})`;
    }
    case 'RLIKE':
    case 'NOT RLIKE':
      return `${f} ${c.op} ${literal(c.value)}`;
    case 'SIZEOF =':
    case 'SIZEOF >':
      return `SIZEOF(${f}) ${c.op.slice(7)} ${literal(c.value, true)}`;
    case 'CONTAINSKEY':
      return `CONTAINSKEY(${f}, ${literal(c.value)})`;
    case 'CONTAINSVALUE':
      return `CONTAINSVALUE(${f}, ${literal(c.value, /^-?\d+(\.\d+)?$/.test(c.value.trim()))})`;
    default:
      return `${f} ${c.op} ${literal(c.value, numeric, c.text)}`;
  }
}

/** The WHERE condition of a group, or '' when it has nothing in it. */
export function where(g: Group, types: Record<string, FieldType> = {}, top = true): string {
  const parts = g.items
    .map((item) => (item.kind === 'group' ? where(item, types, false) : item.field ? condition(item, types) : ''))
    .filter((p) => p !== '');
  if (parts.length === 0) return '';
  const joined = parts.join(` ${g.join} `);
  return parts.length > 1 && !top ? `(${joined})` : joined;
}

function points(p: Extract<Output, { kind: 'distribution' }>['points']): string {
  switch (p.mode) {
    case 'LINEAR':
      return `LINEAR, ${p.n}`;
    case 'REGION':
      return `REGION, ${p.start}, ${p.end}, ${p.step}`;
    case 'MANUAL':
      return `MANUAL, ${p.values.join(', ')}`;
  }
}

function select(o: Output): string {
  switch (o.kind) {
    case 'raw':
      return o.fields.length === 0 ? '*' : o.fields.map((f) => name(f.field) + alias(f.as)).join(', ');
    case 'countDistinct':
      return `COUNT(DISTINCT ${o.fields.map(name).join(', ')})${alias(o.as)}`;
    case 'groupBy': {
      const metrics = o.metrics.map((m) =>
        m.fn === 'COUNT' && !m.field ? `COUNT(*)${alias(m.as)}` : `${m.fn}(${name(m.field ?? '')})${alias(m.as)}`,
      );
      return [...o.groups.map(name), ...metrics].join(', ') || 'COUNT(*)';
    }
    case 'distribution':
      return `${o.type}(${name(o.field)}, ${points(o.points)})`;
    case 'topK': {
      const threshold = o.threshold !== undefined && o.threshold > 0 ? `, ${o.threshold}` : '';
      return `TOP(${o.k}${threshold}, ${o.fields.map(name).join(', ')})${alias(o.as)}`;
    }
  }
}

function quote(time: string): string {
  return /^\d+$/.test(time.trim()) ? time.trim() : "'" + time.trim().replace(/'/g, "''") + "'";
}

/** The FROM clause. */
export function from(s: BuilderState): string {
  const duration = s.durationMs > 0 ? `STREAM(${s.durationMs}, TIME)` : 'STREAM()';
  switch (s.source.kind) {
    case 'stream':
      return duration;
    case 'since':
      return `${duration} SINCE ${quote(s.source.from)}`;
    case 'history':
      return s.source.to ? `HISTORY(${quote(s.source.from)}, ${quote(s.source.to)})` : `HISTORY(${quote(s.source.from)})`;
  }
}

function windowing(w: Window): string {
  switch (w.kind) {
    case 'none':
      return '';
    case 'tumbling':
      return `TUMBLING(${w.ms}, TIME)`;
    case 'additive':
      return `EVERY(${w.ms}, TIME, ALL)`;
    case 'sliding':
      return `EVERY(${w.records}, RECORD, FIRST, ${w.records}, RECORD)`;
  }
}

/** The BQL for a builder state. */
export function toBql(s: BuilderState, types: Record<string, FieldType> = {}): string {
  const lines = [`SELECT ${select(s.output)}`, `FROM ${from(s)}`];
  const cond = where(s.filter, types);
  if (cond) lines.push(`WHERE ${cond}`);
  if (s.output.kind === 'groupBy' && s.output.groups.length > 0) {
    lines.push(`GROUP BY ${s.output.groups.map(name).join(', ')}`);
  }
  const w = windowing(s.window);
  if (w) lines.push(`WINDOWING ${w}`);
  const limited = s.output.kind === 'raw' || s.output.kind === 'groupBy';
  if (limited && s.limit !== undefined && s.limit > 0) lines.push(`LIMIT ${s.limit}`);
  return lines.join('\n');
}

/** The builder's field type for a schema type name (`STRING`, `LONG`, `MAP[STRING]`, ...). */
export function fieldType(schemaType: string): FieldType {
  const t = schemaType.toUpperCase();
  if (t.startsWith('MAP')) return 'MAP';
  if (t.startsWith('LIST')) return 'LIST';
  if (['INTEGER', 'LONG', 'FLOAT', 'DOUBLE', 'NUMBER'].includes(t)) return 'NUMBER';
  if (t === 'BOOLEAN') return 'BOOLEAN';
  if (t === 'STRING') return 'STRING';
  return 'ANY';
}
