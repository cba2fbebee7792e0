// Re-export node:fs plus a globSync stub (Node 20 lacks fs.globSync; conformance 0.1.16 imports it statically).
export * from "node:fs";
import fs from "node:fs";
export default fs;
export function globSync() { throw new Error("fs.globSync unavailable on Node 20 (only needed by tier-check)"); }
