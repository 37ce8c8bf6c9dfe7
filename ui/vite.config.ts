import { defineConfig } from 'vite';

// `needle serve` embeds dist/ and serves it at / (assets under /assets/).
export default defineConfig({
  base: '/',
  build: { target: 'es2020', outDir: 'dist', assetsDir: 'assets', chunkSizeWarningLimit: 800 },
  server: {
    proxy: {
      '/api': { target: process.env.UI_NEEDLE_URL ?? 'http://127.0.0.1:9900', ws: true },
      '/healthz': process.env.UI_NEEDLE_URL ?? 'http://127.0.0.1:9900',
    },
  },
  test: { include: ['test/**/*.test.ts'] },
} as never);
