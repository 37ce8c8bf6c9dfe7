// The way back from BQL to the builder: reads the queries the builder can show (its own, and
// any written by hand in the same shapes) into a builder state. Pure: no DOM, unit-tested in
// test/. A query with a part the builder has no form for is not read: the reason says which.

import { emptyState, type BuilderState, type Condition, type Group, type Metric, type Output, type Window } from './builder';

type Token =
  | { t: 'word'; v: string } // a keyword or a plain field name (as written)
  | { t: 'field'; v: string } // a double-quoted name
  | { t: 'str'; v: string }
  | { t: 'num'; v: string }
  | { t: 'sym'; v: string };

/** The reason a query cannot be shown in the builder. */
export class NotForBuilder extends Error {}

function tokens(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const fail = (what: string) => {
    throw new NotForBuilder(`${what} at character ${i + 1}`);
  };
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === "'" || c === '"') {
      let v = '';
      i++;
      for (;;) {
        if (i >= text.length) fail('an unclosed quote');
        if (text[i] === c && text[i + 1] === c) {
          v += c;
          i += 2;
        } else if (text[i] === c) {
          i++;
          break;
        } else v += text[i++];
      }
      out.push(c === "'" ? { t: 'str', v } : { t: 'field', v });
    } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(text[i + 1] ?? ''))) {
      const m = /^-?\d+(\.\d+)?([eE][-+]?\d+)?/.exec(text.slice(i))!;
      out.push({ t: 'num', v: m[0] });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      // a name, with `.key` paths and `[n]` indexes as the builder writes them
      const m = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?(\.[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?)*/.exec(text.slice(i))!;
      out.push({ t: 'word', v: m[0] });
      i += m[0].length;
    } else {
      const two = text.slice(i, i + 2);
      if (['!=', '<>', '<=', '>='].includes(two)) {
        out.push({ t: 'sym', v: two === '<>' ? '!=' : two });
        i += 2;
      } else if ('(),*=<>'.includes(c)) {
        out.push({ t: 'sym', v: c });
        i++;
      } else fail(`'${c}'`);
    }
  }
  return out;
}

/** Reads `text` into a builder state; throws [`NotForBuilder`] with the reason when it cannot. */
export function fromBql(text: string): BuilderState {
  const ts = tokens(text);
  let p = 0;
  const peek = (k = 0): Token | undefined => ts[p + k];
  const isWord = (w: string, k = 0) => peek(k)?.t === 'word' && peek(k)!.v.toUpperCase() === w;
  const isSym = (s: string, k = 0) => peek(k)?.t === 'sym' && peek(k)!.v === s;
  const fail = (what: string): never => {
    const at = peek();
    throw new NotForBuilder(`${what}${at ? ` (at '${at.v}')` : ' (at the end)'}`);
  };
  const word = (w: string) => (isWord(w) ? (p++, true) : false);
  const sym = (s: string) => (isSym(s) ? (p++, true) : false);
  const expectWord = (w: string) => word(w) || fail(`expected ${w}`);
  const expectSym = (s: string) => sym(s) || fail(`expected '${s}'`);
  const CLAUSES = ['FROM', 'WHERE', 'GROUP', 'WINDOWING', 'LIMIT', 'HAVING', 'ORDER', 'AS'];
  const field = (): string => {
    const tk = peek();
    if (tk?.t === 'field' || (tk?.t === 'word' && !CLAUSES.includes(tk.v.toUpperCase()))) {
      p++;
      return tk.v;
    }
    return fail('expected a field');
  };
  const number = (): number => {
    const tk = peek();
    if (tk?.t !== 'num') return fail('expected a number');
    p++;
    return Number(tk.v);
  };
  const alias = (): string | undefined => (word('AS') ? field() : undefined);
  // a literal as the builder's value box holds it: a string unquoted, a number as written
  const value = (): string => {
    const tk = peek();
    if (tk?.t === 'str' || tk?.t === 'num') {
      p++;
      return tk.v;
    }
    if (tk?.t === 'word' && ['TRUE', 'FALSE', 'NULL'].includes(tk.v.toUpperCase())) {
      p++;
      return tk.v.toLowerCase();
    }
    return fail('expected a value');
  };
  // a list item as the value box holds it: quoted when it holds a comma
  const listItem = () => {
    const v = value();
    return v.includes(',') ? `'${v}'` : v;
  };
  const list = (): string => {
    expectSym('(');
    const items = [listItem()];
    while (sym(',')) items.push(listItem());
    expectSym(')');
    return items.join(', ');
  };

  const state = emptyState();
  state.limit = undefined;

  // SELECT
  expectWord('SELECT');
  state.output = output();
  // FROM
  expectWord('FROM');
  if (word('STREAM')) {
    expectSym('(');
    if (sym(')')) state.durationMs = 0;
    else {
      state.durationMs = number();
      expectSym(',');
      expectWord('TIME');
      expectSym(')');
    }
    if (word('SINCE')) state.source = { kind: 'since', from: time() };
  } else if (word('HISTORY')) {
    expectSym('(');
    const from = time();
    const to = sym(',') ? time() : undefined;
    expectSym(')');
    state.source = to === undefined ? { kind: 'history', from } : { kind: 'history', from, to };
  } else fail('expected STREAM or HISTORY');
  // WHERE
  if (word('WHERE')) state.filter = asGroup(or());
  // GROUP BY
  if (word('GROUP')) {
    expectWord('BY');
    const groups = [field()];
    while (sym(',')) groups.push(field());
    // the groups alone, without a metric
    if (state.output.kind === 'raw' && state.output.fields.every((f) => f.as === undefined)) {
      state.output = { kind: 'groupBy', groups: state.output.fields.map((f) => f.field), metrics: [] };
    }
    if (state.output.kind !== 'groupBy') fail('GROUP BY with this SELECT');
    const o = state.output as Extract<Output, { kind: 'groupBy' }>;
    if (groups.join('\u0000') !== o.groups.join('\u0000')) fail('GROUP BY fields other than those selected');
  }
  // WINDOWING
  if (word('WINDOWING')) state.window = windowing();
  if (word('LIMIT')) state.limit = number();
  if (p < ts.length) fail('a clause the builder has no form for');
  return state;

  function time(): string {
    const tk = peek();
    if (tk?.t === 'str' || tk?.t === 'num') {
      p++;
      return tk.v;
    }
    return fail('expected a time');
  }

  function output(): Output {
    if (sym('*')) return { kind: 'raw', fields: [] };
    const fn = peek()?.t === 'word' && isSym('(', 1) ? peek()!.v.toUpperCase() : '';
    if (fn === 'COUNT' && isWord('DISTINCT', 2)) {
      p += 3;
      const fields = [field()];
      while (sym(',')) fields.push(field());
      expectSym(')');
      return { kind: 'countDistinct', fields, as: alias() };
    }
    if (['QUANTILE', 'FREQ', 'CUMFREQ'].includes(fn)) {
      p += 2;
      const f = field();
      expectSym(',');
      const mode = peek()?.v.toUpperCase();
      p++;
      let points: Extract<Output, { kind: 'distribution' }>['points'];
      if (mode === 'LINEAR') {
        expectSym(',');
        points = { mode: 'LINEAR', n: number() };
      } else if (mode === 'REGION') {
        expectSym(',');
        const start = number();
        expectSym(',');
        const end = number();
        expectSym(',');
        points = { mode: 'REGION', start, end, step: number() };
      } else if (mode === 'MANUAL') {
        const values: number[] = [];
        while (sym(',')) values.push(number());
        points = { mode: 'MANUAL', values };
      } else return fail('expected LINEAR, REGION or MANUAL');
      expectSym(')');
      return { kind: 'distribution', type: fn as 'QUANTILE' | 'FREQ' | 'CUMFREQ', field: f, points };
    }
    if (fn === 'TOP') {
      p += 2;
      const k = number();
      let threshold: number | undefined;
      if (sym(',') && peek()?.t === 'num') {
        threshold = number();
        expectSym(',');
      }
      const fields = [field()];
      while (sym(',')) fields.push(field());
      expectSym(')');
      const o: Output = { kind: 'topK', k, fields, as: alias() };
      if (threshold !== undefined) o.threshold = threshold;
      return o;
    }
    // fields, and aggregates (a GROUP BY, or a GROUP ALL without fields)
    const fields: { field: string; as?: string }[] = [];
    const metrics: Metric[] = [];
    do {
      const f = peek()?.t === 'word' && isSym('(', 1) ? peek()!.v.toUpperCase() : '';
      if (['COUNT', 'SUM', 'MIN', 'MAX', 'AVG'].includes(f)) {
        p += 2;
        const m: Metric = { fn: f as Metric['fn'] };
        if (!(f === 'COUNT' && sym('*'))) m.field = field();
        expectSym(')');
        const as = alias();
        if (as !== undefined) m.as = as;
        metrics.push(m);
      } else {
        const f2 = field();
        const as = alias();
        fields.push(as === undefined ? { field: f2 } : { field: f2, as });
      }
    } while (sym(','));
    if (metrics.length === 0) return { kind: 'raw', fields };
    if (fields.some((f) => f.as !== undefined)) fail('a renamed GROUP BY field');
    return { kind: 'groupBy', groups: fields.map((f) => f.field), metrics };
  }

  function windowing(): Window {
    if (word('TUMBLING')) {
      expectSym('(');
      const ms = number();
      expectSym(',');
      expectWord('TIME');
      expectSym(')');
      return { kind: 'tumbling', ms };
    }
    expectWord('EVERY');
    expectSym('(');
    const n = number();
    expectSym(',');
    if (word('TIME')) {
      expectSym(',');
      expectWord('ALL');
      expectSym(')');
      return { kind: 'additive', ms: n };
    }
    expectWord('RECORD');
    expectSym(',');
    expectWord('FIRST');
    expectSym(',');
    const first = number();
    expectSym(',');
    expectWord('RECORD');
    expectSym(')');
    if (first !== n) fail('a window the builder has no form for');
    return { kind: 'sliding', records: n };
  }

  // conditions: OR of ANDs of conditions and parenthesized groups
  function or(): Condition | Group {
    const items = [and()];
    while (word('OR')) items.push(and());
    return items.length === 1 ? items[0] : { kind: 'group', join: 'OR', items: flatten(items, 'OR') };
  }
  function and(): Condition | Group {
    const items = [primary()];
    while (word('AND')) items.push(primary());
    return items.length === 1 ? items[0] : { kind: 'group', join: 'AND', items: flatten(items, 'AND') };
  }
  function primary(): Condition | Group {
    if (sym('(')) {
      const inner = or();
      expectSym(')');
      return inner;
    }
    const fn = peek()?.t === 'word' && isSym('(', 1) ? peek()!.v.toUpperCase() : '';
    if (fn === 'SIZEOF') {
      p += 2;
      const f = field();
      expectSym(')');
      const op = sym('=') ? 'SIZEOF =' : sym('>') ? 'SIZEOF >' : fail('expected = or > after SIZEOF(...)');
      return { kind: 'cond', field: f, op, value: String(number()) };
    }
    if (fn === 'CONTAINSKEY' || fn === 'CONTAINSVALUE') {
      p += 2;
      const f = field();
      expectSym(',');
      const v = value();
      expectSym(')');
      return { kind: 'cond', field: f, op: fn, value: v };
    }
    const f = field();
    if (word('IS')) {
      const not = word('NOT');
      expectWord('NULL');
      return { kind: 'cond', field: f, op: not ? 'IS NOT NULL' : 'IS NULL', value: '' };
    }
    if (word('BETWEEN')) {
      expectSym('(');
      const lo = value();
      expectSym(',');
      const hi = value();
      expectSym(')');
      return { kind: 'cond', field: f, op: 'BETWEEN', value: `${lo}, ${hi}` };
    }
    const not = word('NOT');
    if (word('IN')) {
      const numeric = isSym('(') && peek(1)?.t === 'num';
      const text = isSym('(') && peek(1)?.t === 'str';
      const c: Condition = { kind: 'cond', field: f, op: not ? 'NOT IN' : 'IN', value: list() };
      return numeric ? { ...c, numeric } : text ? { ...c, text } : c;
    }
    if (word('RLIKE')) return { kind: 'cond', field: f, op: not ? 'NOT RLIKE' : 'RLIKE', value: value() };
    if (not) fail('expected IN or RLIKE after NOT');
    const op = ['=', '!=', '<', '<=', '>', '>='].find((o) => sym(o)) ?? fail('expected a comparison');
    const kind = peek()?.t;
    const v = value();
    if (op === '=' && kind === 'word' && (v === 'true' || v === 'false')) return { kind: 'cond', field: f, op: v === 'true' ? 'IS TRUE' : 'IS FALSE', value: '' };
    const c: Condition = { kind: 'cond', field: f, op, value: v };
    return kind === 'num' ? { ...c, numeric: true } : kind === 'str' ? { ...c, text: true } : c;
  }
}

/** Items of a group, with nested groups of the same join merged in (`a AND (b AND c)`). */
function flatten(items: (Condition | Group)[], join: 'AND' | 'OR'): (Condition | Group)[] {
  return items.flatMap((i) => (i.kind === 'group' && i.join === join ? i.items : [i]));
}

/** The top of a WHERE as the builder's outer group. */
function asGroup(c: Condition | Group): Group {
  return c.kind === 'group' ? c : { kind: 'group', join: 'AND', items: [c] };
}
