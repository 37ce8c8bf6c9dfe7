// The builder's form: fields with types, nested AND/OR groups with type-aware operators, the
// output, the window and the duration. Every change writes BQL into the editor.

import type { Schema } from './api';
import { emptyState, fieldType, operatorsFor, takesValue, toBql, type BuilderState, type FieldType, type Group } from './builder';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

function select(options: string[], value: string, onchange: (v: string) => void, attrs: Record<string, string> = {}): HTMLSelectElement {
  const s = el('select', attrs);
  for (const o of options) s.append(el('option', { value: o }, o));
  s.value = value;
  s.onchange = () => onchange(s.value);
  return s;
}

function input(value: string, onchange: (v: string) => void, attrs: Record<string, string> = {}): HTMLInputElement {
  const i = el('input', attrs);
  i.value = value;
  i.oninput = () => onchange(i.value);
  return i;
}

/** Mounts the builder on `root`, showing `initial` (the editor's query read back) or an empty
 * form. */
export function mountBuilder(root: HTMLElement, schema: () => Schema | null, write: (bql: string) => void, initial?: BuilderState): void {
  const state: BuilderState = initial ?? emptyState();
  const types = (): Record<string, FieldType> => {
    const t: Record<string, FieldType> = {};
    for (const f of schema()?.fields ?? []) t[f.name] = fieldType(Object.keys(f.types)[0] ?? '');
    return t;
  };
  const fields = () => (schema()?.fields ?? []).map((f) => f.name);
  const fieldList = () => {
    let dl = document.getElementById('builder-fields') as HTMLDataListElement | null;
    if (!dl) {
      dl = el('datalist', { id: 'builder-fields' });
      document.body.append(dl);
    }
    const t = types();
    dl.replaceChildren(...fields().map((f) => el('option', { value: f }, `${f} — ${t[f]}`)));
  };

  const emit = () => write(toBql(state, types()));
  const change = () => {
    render();
    emit();
  };

  function groupView(g: Group, depth: number, remove?: () => void): HTMLElement {
    const box = el('div', { class: 'group', 'data-depth': String(depth) });
    const head = el('div', { class: 'row' }, 'Match ', select(['AND', 'OR'], g.join, (v) => ((g.join = v as 'AND' | 'OR'), change()), { 'aria-label': 'join' }), g.join === 'AND' ? ' (all of)' : ' (any of)');
    const add = el('button', { class: 'small', 'data-testid': 'add-condition' }, '+ condition');
    add.onclick = () => (g.items.push({ kind: 'cond', field: '', op: '=', value: '' }), change());
    const addG = el('button', { class: 'small' }, '+ group');
    addG.onclick = () => (g.items.push({ kind: 'group', join: g.join === 'AND' ? 'OR' : 'AND', items: [{ kind: 'cond', field: '', op: '=', value: '' }] }), change());
    head.append(add, addG);
    if (remove) {
      const rm = el('button', { class: 'small danger' }, 'remove group');
      rm.onclick = remove;
      head.append(rm);
    }
    box.append(head);
    g.items.forEach((item, i) => {
      const drop = () => (g.items.splice(i, 1), change());
      if (item.kind === 'group') return box.append(groupView(item, depth + 1, drop));
      const type = types()[item.field] ?? 'ANY';
      const ops = operatorsFor(type);
      if (!ops.includes(item.op)) item.op = ops[0];
      const row = el('div', { class: 'row cond' });
      const f = input(item.field, (v) => {
        item.field = v;
        emit();
      }, { list: 'builder-fields', placeholder: 'field', 'aria-label': 'field' });
      f.onchange = () => change();
      row.append(f, el('span', { class: 'type' }, type), select(ops, item.op, (v) => ((item.op = v), change()), { 'aria-label': 'operator' }));
      if (takesValue(item.op)) {
        const hint = item.op.includes('IN') && !item.op.includes('RLIKE') ? 'a, b, c' : item.op === 'BETWEEN' ? 'low, high' : item.op.includes('RLIKE') ? 'regex (whole value)' : 'value';
        row.append(input(item.value, (v) => ((item.value = v), emit()), { placeholder: hint, 'aria-label': 'value' }));
      }
      const rm = el('button', { class: 'small danger', title: 'remove' }, '×');
      rm.onclick = drop;
      row.append(rm);
      box.append(row);
    });
    return box;
  }

  function outputView(): HTMLElement {
    const o = state.output;
    const box = el('div', { class: 'output' });
    const kinds = ['raw', 'countDistinct', 'groupBy', 'distribution', 'topK'];
    const labels: Record<string, string> = { raw: 'Raw records', countDistinct: 'COUNT DISTINCT', groupBy: 'GROUP BY', distribution: 'DISTRIBUTION', topK: 'TOP K' };
    const kind = el('select', { 'aria-label': 'output', 'data-testid': 'output-kind' });
    for (const k of kinds) kind.append(el('option', { value: k }, labels[k]));
    kind.value = o.kind;
    kind.onchange = () => {
      const f = fields()[0] ?? 'field';
      const next: Record<string, BuilderState['output']> = {
        raw: { kind: 'raw', fields: [] },
        countDistinct: { kind: 'countDistinct', fields: [f] },
        groupBy: { kind: 'groupBy', groups: [], metrics: [{ fn: 'COUNT', as: 'count' }] },
        distribution: { kind: 'distribution', type: 'QUANTILE', field: f, points: { mode: 'LINEAR', n: 11 } },
        topK: { kind: 'topK', k: 10, fields: [f] },
      };
      state.output = next[kind.value];
      change();
    };
    box.append(el('div', { class: 'row' }, 'Output ', kind));
    const csv = (list: string[], set: (l: string[]) => void, placeholder: string, testid: string) => {
      const i = input(list.join(', '), (v) => (set(v.split(',').map((s) => s.trim()).filter(Boolean)), emit()), { placeholder, 'data-testid': testid, list: 'builder-fields' });
      return i;
    };
    if (o.kind === 'raw') {
      box.append(
        el('div', { class: 'row' }, 'Fields ', input(o.fields.map((f) => (f.as ? `${f.field} AS ${f.as}` : f.field)).join(', '), (v) => {
          o.fields = v.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
            const [field, as] = s.split(/\s+AS\s+/i);
            return { field: field.trim(), as: as?.trim() };
          });
          emit();
        }, { placeholder: 'all; or a, b AS renamed', 'data-testid': 'raw-fields' })),
      );
    } else if (o.kind === 'countDistinct') {
      box.append(el('div', { class: 'row' }, 'Of ', csv(o.fields, (l) => (o.fields = l), 'fields', 'cd-fields'), ' as ', input(o.as ?? '', (v) => ((o.as = v), emit()), { placeholder: 'name' })));
    } else if (o.kind === 'groupBy') {
      box.append(el('div', { class: 'row' }, 'Group by ', csv(o.groups, (l) => (o.groups = l), 'fields', 'group-fields')));
      o.metrics.forEach((m, i) => {
        const rm = el('button', { class: 'small danger' }, '×');
        rm.onclick = () => (o.metrics.splice(i, 1), change());
        box.append(
          el('div', { class: 'row' }, select(['COUNT', 'SUM', 'MIN', 'MAX', 'AVG'], m.fn, (v) => ((m.fn = v as typeof m.fn), change()), { 'aria-label': 'metric' }),
            m.fn === 'COUNT' ? '(*)' : input(m.field ?? '', (v) => ((m.field = v), emit()), { placeholder: 'numeric field', list: 'builder-fields' }),
            ' as ', input(m.as ?? '', (v) => ((m.as = v), emit()), { placeholder: 'name' }), rm),
        );
      });
      const add = el('button', { class: 'small' }, '+ metric');
      add.onclick = () => (o.metrics.push({ fn: 'SUM', field: '' }), change());
      box.append(add);
    } else if (o.kind === 'distribution') {
      const p = o.points;
      box.append(
        el('div', { class: 'row' }, select(['QUANTILE', 'FREQ', 'CUMFREQ'], o.type, (v) => ((o.type = v as typeof o.type), change()), { 'aria-label': 'distribution' }), ' of ', input(o.field, (v) => ((o.field = v), emit()), { list: 'builder-fields' })),
        el('div', { class: 'row' }, 'Points ', select(['LINEAR', 'REGION', 'MANUAL'], p.mode, (v) => {
          o.points = v === 'LINEAR' ? { mode: 'LINEAR', n: 11 } : v === 'REGION' ? { mode: 'REGION', start: 0, end: 100, step: 10 } : { mode: 'MANUAL', values: [0.5, 0.9, 0.99] };
          change();
        }),
          p.mode === 'LINEAR' ? input(String(p.n), (v) => ((p.n = Number(v) || 1), emit()), { type: 'number', min: '1' })
            : p.mode === 'REGION' ? input(`${p.start}, ${p.end}, ${p.step}`, (v) => { const [a, b, c] = v.split(',').map(Number); Object.assign(p, { start: a || 0, end: b || 0, step: c || 1 }); emit(); }, { placeholder: 'start, end, step' })
            : input(p.values.join(', '), (v) => ((p.values = v.split(',').map(Number).filter((x) => !Number.isNaN(x))), emit()), { placeholder: 'points' })),
      );
    } else if (o.kind === 'topK') {
      box.append(el('div', { class: 'row' }, 'Top ', input(String(o.k), (v) => ((o.k = Number(v) || 1), emit()), { type: 'number', min: '1', 'aria-label': 'k' }), ' of ', csv(o.fields, (l) => (o.fields = l), 'fields', 'top-fields'), ' at least ', input(String(o.threshold ?? ''), (v) => ((o.threshold = v ? Number(v) : undefined), emit()), { type: 'number', placeholder: 'threshold' }), ' as ', input(o.as ?? '', (v) => ((o.as = v), emit()), { placeholder: 'name' })));
    }
    return box;
  }

  function windowView(): HTMLElement {
    const w = state.window;
    const labels: Record<string, string> = { none: 'none (one result at the end)', tumbling: 'tumbling (every n ms, that interval)', additive: 'additive (every n ms, everything so far)', sliding: 'sliding by record' };
    const kind = el('select', { 'aria-label': 'window', 'data-testid': 'window-kind' });
    for (const k of Object.keys(labels)) kind.append(el('option', { value: k }, labels[k]));
    kind.value = w.kind;
    kind.onchange = () => {
      const v = kind.value;
      state.window = v === 'none' ? { kind: 'none' } : v === 'sliding' ? { kind: 'sliding', records: 1 } : { kind: v as 'tumbling' | 'additive', ms: 1000 };
      change();
    };
    const row = el('div', { class: 'row' }, 'Window ', kind);
    if (w.kind === 'tumbling' || w.kind === 'additive') row.append(input(String(w.ms), (v) => ((w.ms = Number(v) || 1000), emit()), { type: 'number', min: '1', 'data-testid': 'window-ms' }), ' ms');
    if (w.kind === 'sliding') row.append(input(String(w.records), (v) => ((w.records = Number(v) || 1), emit()), { type: 'number', min: '1' }), ' records');
    row.append(' Duration ', input(String(state.durationMs / 1000), (v) => ((state.durationMs = Math.round(Number(v) * 1000) || 0), emit()), { type: 'number', min: '0', 'data-testid': 'duration', 'aria-label': 'duration in seconds' }), ' s');
    row.append(' Limit ', input(String(state.limit ?? ''), (v) => ((state.limit = v ? Number(v) : undefined), emit()), { type: 'number', min: '0', 'aria-label': 'limit' }));
    return row;
  }

  function render() {
    fieldList();
    root.replaceChildren(el('h3', {}, 'Builder'), el('h4', {}, 'Where'), groupView(state.filter, 0), el('h4', {}, 'Output'), outputView(), el('h4', {}, 'Window and duration'), windowView());
  }
  render();
  // an empty form starts the query; a query read back is already in the editor as it is
  if (!initial) emit();
}
