// What the browser keeps: saved queries and past results (localStorage).

export interface Saved {
  id: string;
  name: string;
  query: string;
  saved: number;
}
export interface Past {
  id: string;
  query: string;
  at: number;
  rows: Record<string, unknown>[];
  total: number;
}

const SAVED = 'needle.saved';
const PAST = 'needle.past';

function read<T>(key: string): T[] {
  try {
    return JSON.parse(localStorage.getItem(key) ?? '[]') as T[];
  } catch {
    return [];
  }
}

function write<T>(key: string, items: T[]): void {
  try {
    localStorage.setItem(key, JSON.stringify(items));
  } catch {
    // Full: drop the oldest half and try once more.
    localStorage.setItem(key, JSON.stringify(items.slice(0, Math.ceil(items.length / 2))));
  }
}

export const saved = {
  list: () => read<Saved>(SAVED),
  put(item: Saved) {
    write(SAVED, [item, ...read<Saved>(SAVED).filter((s) => s.id !== item.id)]);
  },
  remove(id: string) {
    write(SAVED, read<Saved>(SAVED).filter((s) => s.id !== id));
  },
  clear: () => localStorage.removeItem(SAVED),
};

export const past = {
  list: () => read<Past>(PAST),
  add(item: Past) {
    // Keep 20 results of at most 500 rows each.
    write(PAST, [{ ...item, rows: item.rows.slice(0, 500) }, ...read<Past>(PAST)].slice(0, 20));
  },
  remove(id: string) {
    write(PAST, read<Past>(PAST).filter((s) => s.id !== id));
  },
  clear: () => localStorage.removeItem(PAST),
};

export function uid(): string {
  return Math.random().toString(36).slice(2, 10);
}
