import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);
import{c as o}from"./chunk-Y6TZLTSR.js";import"./chunk-T5KBF7MA.js";async function r(...e){throw new o("serve --nodes is not built yet")}async function t(...e){throw new o("preflight --nodes is not built yet")}export{t as preflightNodes,r as serveNodes};
