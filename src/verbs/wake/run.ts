export { runWake as run } from '../sleep/run.js';
