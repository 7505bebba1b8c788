import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Served under /console by the local server and from the CDN's root path on AWS: relative asset
// URLs ('./') work in both places.
export default defineConfig({
  base: './',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1500 },
  server: { proxy: { '^/(?!console|src|@|node_modules).*': 'http://127.0.0.1:8000' } },
});
