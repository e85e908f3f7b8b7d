// Preload (node --require) that makes every net/http server listen on 127.0.0.1
// when the program gave no host. server-everything calls app.listen(PORT) with no
// host, which would otherwise bind all interfaces.
"use strict";
const net = require("node:net");
const orig = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  } else if (args[0] && typeof args[0] === "object" && !args[0].path && args[0].host === undefined) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  }
  return orig.apply(this, args);
};
