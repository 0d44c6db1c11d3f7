import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);
import"./chunk-T5KBF7MA.js";async function r(t,i){let{simServe:n}=await import("./main-BEEKKPKC.js");await n([t,...i??[]])}export{r as run};
