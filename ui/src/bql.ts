// BQL in CodeMirror 6: highlighting, completion (keywords, functions, the stream's fields) and
// a linter that asks the server to validate as you type and warns on fields never seen.

import { StreamLanguage, type StringStream } from '@codemirror/language';
import type { CompletionContext, CompletionResult } from '@codemirror/autocomplete';
import type { Diagnostic } from '@codemirror/lint';
import type { EditorView } from '@codemirror/view';
import { api, ApiError } from './api';

export const KEYWORDS =
  'SELECT FROM WHERE GROUP BY HAVING ORDER ASC DESC WINDOWING LIMIT LATERAL VIEW AS DISTINCT AND OR XOR NOT IN IS NULL TRUE FALSE BETWEEN RLIKE ANY ALL NOW STREAM HISTORY SINCE TIME RECORD MAX TUMBLING EVERY FIRST LINEAR REGION MANUAL EXPLODE OUTER'.split(
    ' ',
  );
export const FUNCTIONS =
  'COUNT SUM MIN MAX AVG QUANTILE FREQ CUMFREQ TOP SIZEOF ABS TRIM LOWER UPPER HASH SIZEIS CONTAINSKEY CONTAINSVALUE FILTER IF SUBSTRING UNIXTIMESTAMP CAST'.split(
    ' ',
  );
const TYPES = 'INTEGER LONG FLOAT DOUBLE BOOLEAN STRING LIST MAP'.split(' ');
const WORDS = new Set([...KEYWORDS, ...FUNCTIONS, ...TYPES]);

export const bqlLanguage = StreamLanguage.define<{ inString: boolean }>({
  name: 'bql',
  startState: () => ({ inString: false }),
  token(stream: StringStream) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^'(?:[^']|'')*'?/)) return 'string';
    if (stream.match(/^"(?:[^"]|"")*"?/)) return 'variableName';
    if (stream.match(/^-?\d+(\.\d+)?[LlFf]?/)) return 'number';
    if (stream.match(/^[A-Za-z_][A-Za-z0-9_]*/)) {
      const w = stream.current().toUpperCase();
      if (FUNCTIONS.includes(w) && stream.peek() === '(') return 'function';
      if (KEYWORDS.includes(w)) return 'keyword';
      if (TYPES.includes(w)) return 'typeName';
      return 'variableName';
    }
    if (stream.match(/^(<=|>=|!=|<>|==|[=<>+\-*/%])/)) return 'operator';
    stream.next();
    return 'punctuation';
  },
  languageData: { commentTokens: {} },
});

/** Fields known from the schema, for completion and the never-seen warning. */
export const known = { fields: [] as { name: string; type: string }[], sampled: 0 };

export function complete(context: CompletionContext): CompletionResult | null {
  const word = context.matchBefore(/[A-Za-z_][\w.]*/);
  if (!word && !context.explicit) return null;
  const options = [
    ...known.fields.map((f) => ({ label: f.name, type: 'variable', detail: f.type, boost: 2 })),
    ...FUNCTIONS.map((f) => ({ label: f, type: 'function', apply: `${f}(`, boost: 1 })),
    ...KEYWORDS.map((k) => ({ label: k, type: 'keyword' })),
  ];
  return { from: word ? word.from : context.pos, options, validFor: /^[\w.]*$/ };
}

/** Edit distance, for "did you mean". */
export function distance(a: string, b: string): number {
  const d = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = d[0];
    d[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = d[j];
      d[j] = Math.min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return d[b.length];
}

/** Names used in the query that the stream never carried, with a suggestion. */
export function unseenFields(text: string): { from: number; to: number; name: string; suggestion?: string }[] {
  if (known.sampled === 0 || known.fields.length === 0) return [];
  const names = new Set(known.fields.map((f) => f.name.split('.')[0]));
  const aliases = new Set<string>();
  for (const m of text.matchAll(/\bAS\s+\(?\s*([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))?/gi)) {
    aliases.add(m[1]);
    if (m[2]) aliases.add(m[2]);
  }
  const out: { from: number; to: number; name: string; suggestion?: string }[] = [];
  // Skip strings and quoted names; look at bare words not followed by '(' and not after '.'.
  const re = /'(?:[^']|'')*'|"(?:[^"]|"")*"|([A-Za-z_]\w*)/g;
  for (const m of text.matchAll(re)) {
    const w = m[1];
    if (!w) continue;
    const at = m.index ?? 0;
    if (text[at - 1] === '.' || /^\s*\(/.test(text.slice(at + w.length))) continue;
    if (/^\d/.test(w) || WORDS.has(w.toUpperCase()) || names.has(w) || aliases.has(w)) continue;
    if (/^\d+[lLfF]$/.test(w)) continue;
    let best: string | undefined;
    let bestD = 3;
    for (const n of names) {
      const dist = distance(w.toLowerCase(), n.toLowerCase());
      if (dist < bestD) {
        bestD = dist;
        best = n;
      }
    }
    out.push({ from: at, to: at + w.length, name: w, suggestion: best });
  }
  return out;
}

/** The offset of a 1-based line and column in `text`. */
export function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  let offset = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
  return Math.min(text.length, offset + Math.max(0, column - 1));
}

export interface Validation {
  ok: boolean;
  explain?: string;
  error?: ApiError['body'];
}
export const lastValidation: { current: Validation | null; listeners: ((v: Validation) => void)[] } = {
  current: null,
  listeners: [],
};

export async function lint(view: EditorView): Promise<Diagnostic[]> {
  const text = view.state.doc.toString();
  if (!text.trim()) return [];
  const diagnostics: Diagnostic[] = [];
  let v: Validation;
  try {
    const r = await api<{ explain: string }>('/api/v1/validate', {
      method: 'POST',
      headers: { 'Content-Type': 'text/plain' },
      body: text,
    });
    v = { ok: true, explain: r.explain };
  } catch (e) {
    const err = e as ApiError;
    v = { ok: false, error: err.body && err.body.error ? err.body : { error: err.message } };
    if (err.status === 0) {
      v.error = { error: err.message, hint: 'the server is not answering; the check will run again as you type' };
    }
    const b = v.error!;
    const from = b.line ? offsetOf(text, b.line, b.column ?? 1) : 0;
    let to = from;
    const rest = text.slice(from).match(/^[\w.']+|^\S/);
    to = Math.min(text.length, from + (rest ? rest[0].length : 1));
    const where = b.line ? ` (line ${b.line}, column ${b.column})` : '';
    diagnostics.push({
      from: Math.min(from, text.length),
      to: Math.max(to, Math.min(from, text.length)),
      severity: 'error',
      message: `${b.error}${where}${b.hint ? `\nhint: ${b.hint}` : ''}`,
    });
  }
  for (const u of unseenFields(text)) {
    diagnostics.push({
      from: u.from,
      to: u.to,
      severity: 'warning',
      message: `\`${u.name}\`: never seen in the stream${u.suggestion ? `; did you mean \`${u.suggestion}\`?` : ''}`,
    });
  }
  lastValidation.current = v;
  for (const l of lastValidation.listeners) l(v);
  return diagnostics;
}
