import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);
import{c as o}from"./chunk-Y6TZLTSR.js";import"./chunk-T5KBF7MA.js";async function n(){throw new o("client-env is not built yet")}export{n as run};
