import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);
import{a}from"./chunk-TDB7NDWR.js";import"./chunk-T5KBF7MA.js";export{a as RealHost};
