// Interop peer: the MCP TypeScript SDK v2 (`@modelcontextprotocol/server`, pinned by
// .ci/interop-setup.sh), serving the 2026-07-28 revision over Streamable HTTP on 127.0.0.1,
// path /mcp, through `createMcpHandler` wrapped by `toNodeHandler` (`@modelcontextprotocol/node`).
//
//   node tests/interop/ts2_server.mjs --port 18090 [--legacy reject|stateless] [--response auto|sse|json]
//
// --legacy: `stateless` (the SDK's default) also answers 2025-era traffic, one fresh server per
// request; `reject` is modern-only and answers 2025-era requests with -32022.
// The packages are imported from $MCP_INTEROP_NODE_MODULES, else from <repo>/.interop/npm/node_modules.
//
// Tools: add(a, b: integer) -> a+b; echo(text) -> text; region_echo(region, text), whose
// `region` carries `x-mcp-header: Region` (so a call needs `Mcp-Param-Region`); grow() registers
// the tool `extra` (echo under another name) for every later request and publishes
// notifications/tools/list_changed to open `subscriptions/listen` streams. The server declares
// tools.listChanged. Prints `listening <port>` on stdout when ready.
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(option('--port', '0'));
const legacy = option('--legacy', 'stateless');
const responseMode = option('--response', 'auto');
const modules =
  process.env.MCP_INTEROP_NODE_MODULES ??
  join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), '.interop', 'npm', 'node_modules');
const load = (pkg, entry) => import(pathToFileURL(join(modules, pkg, entry)).href);

const { McpServer, createMcpHandler, fromJsonSchema } = await load('@modelcontextprotocol/server', 'dist/index.mjs');
const { toNodeHandler } = await load('@modelcontextprotocol/node', 'dist/index.mjs');

const text = (s) => ({ content: [{ type: 'text', text: String(s) }] });
let grown = false;

function factory() {
  const server = new McpServer(
    { name: 'ts2-interop', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.registerTool(
    'add',
    {
      description: 'Add two integers.',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'integer' } },
        required: ['a', 'b'],
      }),
    },
    async ({ a, b }) => text(a + b),
  );
  server.registerTool(
    'echo',
    {
      description: 'Echo the text back.',
      inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
    },
    async ({ text: t }) => text(t),
  );
  server.registerTool(
    'region_echo',
    {
      description: 'Echo the region and the text; region is mirrored into the Mcp-Param-Region header.',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, text: { type: 'string' } },
        required: ['region', 'text'],
      }),
    },
    async ({ region, text: t }) => text(`${region}: ${t}`),
  );
  server.registerTool(
    'grow',
    { description: 'Add the tool extra and announce the change to subscriptions/listen streams.' },
    async () => {
      grown = true;
      handler.notify.toolsChanged();
      return text('grown');
    },
  );
  if (grown) {
    server.registerTool(
      'extra',
      {
        description: 'Echo, added by grow.',
        inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
      },
      async ({ text: t }) => text(t),
    );
  }
  return server;
}

const handler = createMcpHandler(factory, { legacy, responseMode });
const node = toNodeHandler(handler);
const http = createServer((req, res) => {
  if (new URL(req.url, 'http://127.0.0.1').pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  node(req, res);
});
http.listen(port, '127.0.0.1', () => {
  console.log(`listening ${http.address().port}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    handler.close().finally(() => process.exit(0));
  });
}
