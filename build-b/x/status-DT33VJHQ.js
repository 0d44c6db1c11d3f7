import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);
import{c as o}from"./chunk-Y6TZLTSR.js";import"./chunk-T5KBF7MA.js";async function t(){throw new o("status is not built yet")}export{t as run};
