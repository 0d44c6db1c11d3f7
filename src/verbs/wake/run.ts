export { runWake as run } from '../sleeping.js';
