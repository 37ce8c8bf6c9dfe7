import { afterEach, describe, expect, it, vi } from 'vitest';
import { api } from '../src/api';

/** A session store, a token dialog that counts its openings, and a fetch the test scripts. */
function page(responses: ((auth: string | null) => unknown)[]) {
  const stored = new Map<string, string>();
  vi.stubGlobal('sessionStorage', {
    getItem: (k: string) => stored.get(k) ?? null,
    setItem: (k: string, v: string) => void stored.set(k, v),
  });
  const dialog = {
    opened: 0,
    input: { value: '' },
    form: { onsubmit: null as null | ((e: { preventDefault(): void }) => void) },
    reason: { textContent: '' },
    showModal() {
      this.opened++;
    },
    close() {},
    querySelector(sel: string) {
      return sel === 'input' ? this.input : sel === 'form' ? this.form : this.reason;
    },
  };
  vi.stubGlobal('document', { getElementById: () => dialog });
  const seen: (string | null)[] = [];
  vi.stubGlobal('fetch', async (_path: string, init: RequestInit) => {
    const auth = new Headers(init.headers).get('Authorization');
    seen.push(auth);
    return responses.shift()!(auth);
  });
  const submit = (t: string) => {
    dialog.input.value = t;
    dialog.form.onsubmit!({ preventDefault() {} });
  };
  return { stored, dialog, seen, submit };
}

const ok = (body: unknown) => () => ({ status: 200, ok: true, text: async () => JSON.stringify(body) });

afterEach(() => vi.unstubAllGlobals());

describe('a request to a server that needs a token', () => {
  it('asks once, then sends the token given', async () => {
    const p = page([() => ({ status: 401, json: async () => ({ error: 'a token is needed' }) }), ok({ n: 1 })]);
    const answer = api('/api/v1/schema');
    await vi.waitFor(() => expect(p.dialog.opened).toBe(1));
    p.submit('s3cret');
    expect(await answer).toEqual({ n: 1 });
    expect(p.seen).toEqual([null, 'Bearer s3cret']);
  });

  it('does not ask again when the token was given while its refusal was being read', async () => {
    // the person submits the dialog another request opened while this one's 401 body arrives
    let given = false;
    const p = page([
      () => ({
        status: 401,
        json: async () => {
          p.stored.set('needle.token', 's3cret');
          given = true;
          return { error: 'a token is needed' };
        },
      }),
      ok({ n: 2 }),
    ]);
    const answer = api('/api/v1/queries');
    const settled = await Promise.race([answer, new Promise((r) => setTimeout(() => r('still waiting'), 200))]);
    expect(given).toBe(true);
    expect(p.dialog.opened).toBe(0);
    expect(settled).toEqual({ n: 2 });
    expect(p.seen).toEqual([null, 'Bearer s3cret']);
  });
});
