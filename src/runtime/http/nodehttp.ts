// node:http for Stateward's servers and clients. Not `import … from
// 'node:http'`: an ES module import of node:http reads every export,
// WebSocket's lazy getter among them, and that loads Node's own copy of undici
// (~13 MiB of RSS, issue 19) for a WebSocket nothing here uses. Type-only
// imports from 'node:http' cost nothing and stay as they are.
export const http = process.getBuiltinModule('node:http');
