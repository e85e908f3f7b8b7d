// Interop peer: Mastra's MCP server (`@mastra/mcp` 2.x, pinned by .ci/interop-setup.sh), which
// serves only the 2026-07-28 revision (2025-era requests are rejected with -32022), over
// Streamable HTTP on 127.0.0.1, path /mcp, through `MCPServer.startHTTP`.
//
//   node tests/interop/mastra_server.mjs --port 18093
//
// The packages are imported from $MCP_INTEROP_NODE_MODULES, else from <repo>/.interop/npm/node_modules.
// Tools: add(a, b: integer) -> a+b; echo(text) -> text. Prints `listening <port>` on stdout when ready.
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(option('--port', '0'));
const modules =
  process.env.MCP_INTEROP_NODE_MODULES ??
  join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), '.interop', 'npm', 'node_modules');
const load = (pkg, entry) => import(pathToFileURL(join(modules, pkg, entry)).href);

const { MCPServer } = await load('@mastra/mcp', 'dist/index.js');
const { createTool } = await load('@mastra/core', 'dist/tools/index.js');
const { z } = await load('zod', 'index.js');

const add = createTool({
  id: 'add',
  description: 'Add two integers.',
  inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
  execute: async ({ a, b }) => ({ sum: a + b }),
});
const echo = createTool({
  id: 'echo',
  description: 'Echo the text back.',
  inputSchema: z.object({ text: z.string() }),
  execute: async ({ text }) => text,
});

const server = new MCPServer({ id: 'mastra-interop', name: 'mastra-interop', version: '1.0.0', tools: { add, echo } });

const http = createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  server.startHTTP({ url, httpPath: '/mcp', req, res }).catch((e) => {
    console.error(e);
    if (!res.headersSent) res.writeHead(500).end();
  });
});
http.listen(port, '127.0.0.1', () => {
  console.log(`listening ${http.address().port}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close().finally(() => process.exit(0));
  });
}
